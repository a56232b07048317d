package callback

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/srjn45/rdq"
)

// respond returns a handler answering status with body as contentType,
// and a Retry-After when retryAfter is set.
func respond(status int, contentType, retryAfter, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// remoteOf returns the rdq.RemoteError in err's chain, or fails the test.
func remoteOf(t *testing.T, err error) *rdq.RemoteError {
	t.Helper()
	var re *rdq.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want an rdq.RemoteError", err, err)
	}
	var se *StatusError
	if errors.As(err, &se) {
		t.Fatalf("err = %v also holds a StatusError", err)
	}
	return re
}

// A structured failure body naming one of rdq's reserved error types is
// recorded with the remote_ prefix: a receiver cannot pass its failure off
// as an operator's cancel or a lost lease.
func TestFailureBodyReservedType(t *testing.T) {
	for typ, want := range map[string]string{"cancelled": "remote_cancelled", "lease_expired": "remote_lease_expired", "timeout": "timeout"} {
		srv := serve(t, respond(500, FailureContentType, "", `{"version":1,"error_type":"`+typ+`","message":"m"}`))
		err := run(t, newCaller(t, Config{}), srv.URL, testTask())
		remoteOf(t, err)
		if got := rdq.Describe(err).Type; got != want {
			t.Errorf("error_type %q recorded as %q, want %q", typ, got, want)
		}
	}
}

// A structured failure body is recorded with the handler's type, message
// and stack, while the status keeps deciding the outcome class.
func TestFailureBodyRecordsTheHandlersFailure(t *testing.T) {
	const body = `{"version":1,"error_type":"BankError","message":"bank unreachable <on> attempt 1","stack":"BankError: bank unreachable\n    at charge (bank.ts:12:7)"}`
	cases := map[string]struct {
		status      int
		contentType string
		retryAfter  string
		permanent   bool
		delay       time.Duration
	}{
		"500 retryable":              {status: 500, contentType: FailureContentType},
		"429 retryable":              {status: 429, contentType: FailureContentType},
		"media type with parameters": {status: 500, contentType: FailureContentType + "; charset=utf-8"},
		"503 with Retry-After":       {status: 503, contentType: FailureContentType, retryAfter: "7", delay: 7 * time.Second},
		"422 permanent":              {status: 422, contentType: FailureContentType, permanent: true},
		"400 permanent":              {status: 400, contentType: FailureContentType, permanent: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, respond(tc.status, tc.contentType, tc.retryAfter, body))
			err := run(t, newCaller(t, Config{}), srv.URL, testTask())
			remoteOf(t, err)
			f := rdq.Describe(err)
			if f.Type != "BankError" || f.Message != "bank unreachable <on> attempt 1" || f.Stack != "BankError: bank unreachable\n    at charge (bank.ts:12:7)" {
				t.Errorf("recorded %+v", f)
			}
			if got := rdq.IsPermanent(err); got != tc.permanent {
				t.Errorf("permanent = %v, want %v", got, tc.permanent)
			}
			d, ok := rdq.RetryAfterOf(err)
			if ok != (tc.delay != 0) || d != tc.delay {
				t.Errorf("RetryAfterOf = %v, %v; want %v", d, ok, tc.delay)
			}
		})
	}
}

// Hostile failure bodies are cleaned and capped exactly as a gRPC
// handler's Failure is (rdq.Describe of an rdq.RemoteError), and nothing
// they hold can make the attempt unrecordable.
func TestFailureBodyHostileText(t *testing.T) {
	cases := map[string]struct {
		body  string
		want  rdq.RemoteError // what the body holds, as JSON decodes it
		check func(t *testing.T, f rdq.Failure)
	}{
		"invalid UTF-8": {
			body: "{\"version\":1,\"error_type\":\"Bad\xffType\",\"message\":\"caf\xc3 \xfe\",\"stack\":\"at \xc0x\"}",
			want: rdq.RemoteError{Type: "Bad\uFFFDType", Message: "caf\uFFFD \uFFFD", Stack: "at \uFFFDx"},
			check: func(t *testing.T, f rdq.Failure) {
				for _, s := range []string{f.Type, f.Message, f.Stack} {
					if !utf8.ValidString(s) {
						t.Errorf("%q is not valid UTF-8", s)
					}
				}
			},
		},
		"control characters and NUL": {
			body: `{"version":1,"error_type":"Nul\u0000Type","message":"line\r\nforged: yes\u001b[31m\u0000","stack":"\u0000\u0007"}`,
			want: rdq.RemoteError{Type: "Nul\x00Type", Message: "line\r\nforged: yes\x1b[31m\x00", Stack: "\x00\a"},
			check: func(t *testing.T, f rdq.Failure) {
				if f.Type != `Nul\x00Type` || strings.IndexByte(f.Message+f.Stack, 0) >= 0 {
					t.Errorf("NUL bytes kept: %+v", f)
				}
			},
		},
		"huge stack, message and type": {
			body: `{"version":1,"error_type":"` + strings.Repeat("T", 10<<10) + `","message":"` + strings.Repeat("m", 50<<10) +
				`","stack":"` + strings.Repeat("s", 180<<10) + `"}`,
			want: rdq.RemoteError{Type: strings.Repeat("T", 10<<10), Message: strings.Repeat("m", 50<<10), Stack: strings.Repeat("s", 180<<10)},
			check: func(t *testing.T, f rdq.Failure) {
				if len(f.Type) > rdq.MaxErrorTypeLength || len(f.Message) > rdq.MaxMessageBytes || len(f.Stack) > rdq.MaxStackBytes {
					t.Errorf("not capped: type %d, message %d, stack %d bytes", len(f.Type), len(f.Message), len(f.Stack))
				}
				if !strings.HasPrefix(f.Stack, "sss") || !strings.HasPrefix(f.Message, "mmm") {
					t.Errorf("the start of the text was not kept: %.20q, %.20q", f.Message, f.Stack)
				}
			},
		},
		"empty type and message": {
			body: `{"version":1,"error_type":"","message":""}`,
			want: rdq.RemoteError{},
			check: func(t *testing.T, f rdq.Failure) {
				if f.Type != "error" || f.Message == "" {
					t.Errorf("recorded %+v, want type error and a message saying there was none", f)
				}
			},
		},
		"unknown members are ignored": {
			body: `{"version":1,"error_type":"E","message":"m","detail":{"x":[1]},"title":"t"}`,
			want: rdq.RemoteError{Type: "E", Message: "m"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, respond(500, FailureContentType, "", tc.body))
			err := run(t, newCaller(t, Config{}), srv.URL, testTask())
			remoteOf(t, err)
			f := rdq.Describe(err)
			if want := rdq.Describe(&tc.want); f != want {
				t.Errorf("recorded\n%+.200v\nwant, as for a gRPC handler's Failure,\n%+.200v", f, want)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// A body that is not a version 1 failure document, or is too large, is
// read as any other: the status names the failure and the start of the
// body is its message.
func TestFailureBodyMalformedFallsBack(t *testing.T) {
	valid := `{"version":1,"error_type":"E","message":"m"}`
	cases := map[string]struct {
		status      int
		contentType string
		body        string
	}{
		"not JSON":             {500, FailureContentType, `{"version":1,"error_type":"E"`},
		"a JSON array":         {500, FailureContentType, `[1]`},
		"no version":           {500, FailureContentType, `{"error_type":"E","message":"m"}`},
		"another version":      {500, FailureContentType, `{"version":2,"error_type":"E","message":"m"}`},
		"version as a string":  {500, FailureContentType, `{"version":"1","error_type":"E","message":"m"}`},
		"no error_type":        {500, FailureContentType, `{"version":1,"message":"m"}`},
		"error_type a number":  {500, FailureContentType, `{"version":1,"error_type":7,"message":"m"}`},
		"message null":         {500, FailureContentType, `{"version":1,"error_type":"E","message":null}`},
		"stack an object":      {500, FailureContentType, `{"version":1,"error_type":"E","message":"m","stack":{}}`},
		"trailing data":        {500, FailureContentType, valid + `{}`},
		"plain JSON":           {500, "application/json", valid},
		"problem document":     {500, "application/problem+json", valid},
		"no content type":      {500, "", valid},
		"a redirect":           {307, FailureContentType, valid},
		"larger than the cap":  {500, FailureContentType, `{"version":1,"error_type":"E","message":"m","stack":"` + strings.Repeat("s", MaxFailureBody) + `"}`},
		"invalid content type": {500, FailureContentType + ";;", valid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{tc.contentType}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			err := run(t, newCaller(t, Config{}), srv.URL, testTask())
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Fatalf("err = %v (%T), want a StatusError %d", err, err, tc.status)
			}
			var re *rdq.RemoteError
			if errors.As(err, &re) {
				t.Errorf("err = %v holds a RemoteError", err)
			}
			want := tc.body
			if len(want) > DefaultMaxErrorBody {
				want = want[:DefaultMaxErrorBody] + "…[truncated]"
			}
			if se.Body != want {
				t.Errorf("body = %.80q, want %.80q", se.Body, want)
			}
		})
	}
}

// A failure body cut short by the end of the call is not parsed: the
// attempt is a timeout, as for any body.
func TestFailureBodyCutShortTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", FailureContentType)
		w.WriteHeader(500)
		_, _ = w.Write([]byte(`{"version":1,"error_type":"E",`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	err := run(t, newCaller(t, Config{Timeout: 200 * time.Millisecond}), srv.URL, testTask())
	var te *rdq.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want a TimeoutError", err, err)
	}
}

// WriteFailure answers each class with its status and the body, and a nil
// error as a retryable failure naming the bug.
func TestWriteFailure(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		retryAfter string
		wantType   string
	}{
		{rdq.Permanent(&rdq.RemoteError{Type: "Bad", Message: "m"}), 422, "", "Bad"},
		{rdq.RetryAfter(1500*time.Millisecond, errors.New("later")), 503, "2", "*errors.errorString"},
		{errors.New("down"), 500, "", "*errors.errorString"},
		{nil, 500, "", "*errors.errorString"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		WriteFailure(rec, tc.err)
		if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter || rec.Header().Get("Content-Type") != FailureContentType {
			t.Errorf("%v: status %d, Retry-After %q, Content-Type %q", tc.err, rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"))
		}
		re, ok := parseFailure(rec.Body.Bytes())
		if !ok || re.Type != tc.wantType {
			t.Errorf("%v: body %s parses as %+v, %v; want type %q", tc.err, rec.Body, re, ok, tc.wantType)
		}
		if tc.err == nil && !strings.Contains(re.Message, "nil error") {
			t.Errorf("a nil error is answered as %q", re.Message)
		}
	}
}

// BenchmarkParseFailure measures reading a failure body: a typical one
// (a 2 KiB stack) and one at the caps of every field.
func BenchmarkParseFailure(b *testing.B) {
	for name, re := range map[string]rdq.RemoteError{
		"typical": {Type: "BankError", Message: "bank unreachable on attempt 1", Stack: strings.Repeat("    at charge (bank.js:12:7)\n", 70)},
		"capped":  {Type: strings.Repeat("T", rdq.MaxErrorTypeLength), Message: strings.Repeat("m", rdq.MaxMessageBytes), Stack: strings.Repeat("s", rdq.MaxStackBytes)},
	} {
		rec := httptest.NewRecorder()
		writeFailure(rec, 500, &re)
		body := rec.Body.Bytes()
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := parseFailure(body); !ok {
					b.Fatal("not parsed")
				}
			}
		})
	}
}

// BenchmarkCallFailure measures a failed callback over loopback, answered
// with plain text and with the structured failure body.
func BenchmarkCallFailure(b *testing.B) {
	for name, h := range map[string]http.HandlerFunc{
		"plain": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "BankError: bank unreachable on attempt 1", http.StatusInternalServerError)
		},
		"structured": func(w http.ResponseWriter, r *http.Request) {
			WriteFailure(w, &rdq.RemoteError{Type: "BankError", Message: "bank unreachable on attempt 1", Stack: strings.Repeat("    at charge (bank.js:12:7)\n", 70)})
		},
	} {
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			c, err := New(Config{Secret: secret, Allow: []string{"127.0.0.1"}, AllowAddrs: []string{"127.0.0.1"}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			handle, err := c.Handler(Target{URL: srv.URL})
			if err != nil {
				b.Fatal(err)
			}
			task := testTask()
			b.ReportAllocs()
			for b.Loop() {
				if err := handle(context.Background(), task); err == nil {
					b.Fatal("succeeded")
				}
			}
		})
	}
}

// Whatever a receiver answers, parsing neither panics nor yields text a
// store cannot record once described: valid UTF-8, no NUL, within the caps.
func FuzzParseFailure(f *testing.F) {
	f.Add([]byte(`{"version":1,"error_type":"E","message":"m","stack":"s"}`))
	f.Add([]byte("{\"version\":1,\"error_type\":\"\\u0000\xff\",\"message\":\"\\ud800\",\"stack\":null}"))
	f.Add([]byte(`{"version":1,"error_type":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		re, ok := parseFailure(body)
		if !ok {
			return
		}
		d := rdq.Describe(re)
		for _, s := range []string{d.Type, d.Message, d.Stack} {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("described %q", s)
			}
		}
		if d.Type == "" || len(d.Type) > rdq.MaxErrorTypeLength || len(d.Message) > rdq.MaxMessageBytes || len(d.Stack) > rdq.MaxStackBytes {
			t.Fatalf("described %+v", d)
		}
	})
}
