package crosslang

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
)

// callbackFailuresFile holds failure bodies of callback responses and
// what the attempt records; the TypeScript and Python receivers answer
// the ones with a thrown exception.
var callbackFailuresFile = filepath.Join("..", "..", "testdata", "conformance", "callback_failures.json")

type callbackFailures struct {
	MediaType string `json:"media_type"`
	Version   int    `json:"version"`
	Limits    struct {
		ErrorTypeBytes int `json:"error_type_bytes"`
		MessageBytes   int `json:"message_bytes"`
		StackBytes     int `json:"stack_bytes"`
		BodyBytes      int `json:"body_bytes"`
	} `json:"limits"`
	Cuts []struct {
		Limit int    `json:"limit"`
		Text  string `json:"text"`
		Want  string `json:"want"`
	} `json:"cuts"`
	Vectors []struct {
		Name     string `json:"name"`
		Response struct {
			Status      int    `json:"status"`
			ContentType string `json:"content_type"`
			RetryAfter  string `json:"retry_after"`
			Body        string `json:"body"`
		} `json:"response"`
		Records struct {
			Outcome   string `json:"outcome"`
			DelayMS   int64  `json:"delay_ms"`
			ErrorType string `json:"error_type"`
			Message   string `json:"message"`
			Stack     string `json:"stack"`
		} `json:"records"`
	} `json:"vectors"`
}

// The Go caller records every failure response of the vectors as they
// say, the vectors' constants are the callback package's and rdq's, and
// their cuts are rdq.Truncate's.
func TestCallbackFailureVectors(t *testing.T) {
	raw, err := os.ReadFile(callbackFailuresFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc callbackFailures
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", callbackFailuresFile, err)
	}
	if doc.MediaType != callback.FailureContentType || doc.Version != callback.FailureVersion ||
		doc.Limits.ErrorTypeBytes != rdq.MaxErrorTypeLength || doc.Limits.MessageBytes != rdq.MaxMessageBytes ||
		doc.Limits.StackBytes != rdq.MaxStackBytes || doc.Limits.BodyBytes != callback.MaxFailureBody {
		t.Errorf("the vectors' media type, version and limits %v %v %+v are not the Go constants", doc.MediaType, doc.Version, doc.Limits)
	}
	if len(doc.Vectors) == 0 || len(doc.Cuts) == 0 {
		t.Fatal("no vectors")
	}
	for _, c := range doc.Cuts {
		if got := rdq.Truncate(c.Text, c.Limit); got != c.Want || len(got) > c.Limit {
			t.Errorf("rdq.Truncate(%q, %d) = %q, the vector says %q", c.Text, c.Limit, got, c.Want)
		}
	}
	secret := []byte("a-raw-secret-of-32-bytes-for-rdq")
	caller, err := callback.New(callback.Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	for _, v := range doc.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", v.Response.ContentType)
				if v.Response.RetryAfter != "" {
					w.Header().Set("Retry-After", v.Response.RetryAfter)
				}
				w.WriteHeader(v.Response.Status)
				_, _ = w.Write([]byte(v.Response.Body))
			}))
			defer srv.Close()
			handle, err := caller.Handler(callback.Target{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = handle(context.Background(), &rdq.Task{ID: rdq.NewID(), Queue: "orders", Handler: "charge"})
			if err == nil {
				t.Fatal("the failure was recorded as a success")
			}
			outcome := "retryable"
			delay, after := rdq.RetryAfterOf(err)
			switch {
			case rdq.IsPermanent(err):
				outcome = "permanent"
			case after:
				outcome = "retry_after"
			}
			if outcome != v.Records.Outcome || delay != time.Duration(v.Records.DelayMS)*time.Millisecond {
				t.Errorf("outcome %s, delay %v; want %s, %dms", outcome, delay, v.Records.Outcome, v.Records.DelayMS)
			}
			f := rdq.Describe(err)
			want := strings.ReplaceAll(v.Records.Message, "{url}", srv.URL)
			if f.Type != v.Records.ErrorType || f.Message != want || f.Stack != v.Records.Stack {
				t.Errorf("recorded type %q, message %q, stack %q;\nwant type %q, message %q, stack %q", f.Type, f.Message, f.Stack, v.Records.ErrorType, want, v.Records.Stack)
			}
		})
	}
}
