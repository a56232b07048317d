package callback

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srjn45/rdq"
)

// A Receiver's answer makes the Caller record the outcome its function
// returned: success, a permanent failure, a retry after a delay, or a
// retryable failure, each with the function's error type and text.
func TestReceiverOutcomes(t *testing.T) {
	cases := map[string]struct {
		err        error
		check      func(t *testing.T, err error)
		wantInText string
	}{
		"success": {err: nil},
		"permanent": {
			err:        rdq.Permanent(errors.New("order 42 has no lines")),
			wantInText: "order 42 has no lines",
			check: func(t *testing.T, err error) {
				if !rdq.IsPermanent(err) {
					t.Errorf("%v is not permanent", err)
				}
			},
		},
		"retry after": {
			err:        rdq.RetryAfter(90*time.Second+time.Millisecond, errors.New("the ledger is locked")),
			wantInText: "the ledger is locked",
			check: func(t *testing.T, err error) {
				if d, ok := rdq.RetryAfterOf(err); !ok || d != 91*time.Second {
					t.Errorf("RetryAfterOf = %v, %v; want 91s (rounded up)", d, ok)
				}
			},
		},
		"snooze": {
			err:        rdq.Snooze(2 * time.Minute),
			wantInText: "snoozed for 2m0s",
			check: func(t *testing.T, err error) {
				if d, ok := rdq.RetryAfterOf(err); !ok || d != 2*time.Minute {
					t.Errorf("RetryAfterOf = %v, %v; want 2m", d, ok)
				}
			},
		},
		"retryable": {
			err:        errors.New("the ledger is down"),
			wantInText: "the ledger is down",
			check: func(t *testing.T, err error) {
				if rdq.IsPermanent(err) {
					t.Errorf("%v is permanent", err)
				}
				if _, ok := rdq.RetryAfterOf(err); ok {
					t.Errorf("%v asks for a delay", err)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got *Message
			srv := serve(t, Receiver(secret, 0, func(_ context.Context, m *Message) error {
				got = m
				return tc.err
			}).ServeHTTP)
			task := testTask()
			err := run(t, newCaller(t, Config{}), srv.URL+"/hooks/orders", task)
			if got == nil || got.Data.ID != task.ID.String() || got.Data.Queue != "orders" || got.Data.LeaseToken != 7 || string(got.Data.Body()) != `{"order":42}` {
				t.Fatalf("the function got %+v", got)
			}
			if tc.err == nil {
				if err != nil {
					t.Errorf("err = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the failure was recorded as a success")
			}
			remoteOf(t, err)
			want := rdq.Describe(tc.err)
			if got := rdq.Describe(err); got.Type != want.Type || got.Message != want.Message || got.Stack != "" {
				t.Errorf("recorded %+v, want the function's error %+v", got, want)
			}
			if !strings.Contains(err.Error(), tc.wantInText) {
				t.Errorf("err = %v, want it to hold %q", err, tc.wantInText)
			}
			tc.check(t, err)
		})
	}
}

// A panic is a retryable failure naming it, with its stack, and the
// receiver goes on serving.
func TestReceiverPanic(t *testing.T) {
	var calls atomic.Int32
	srv := serve(t, Receiver(secret, 0, func(context.Context, *Message) error {
		if calls.Add(1) == 1 {
			panic("nil map")
		}
		return nil
	}).ServeHTTP)
	c := newCaller(t, Config{})
	err := run(t, c, srv.URL+"/hooks", testTask())
	if err == nil || rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "panic" || err.Error() != "panic: nil map" {
		t.Errorf("err = %v (type %s), want a retryable panic naming its value", err, rdq.ErrorTypeOf(err))
	}
	if f := rdq.Describe(err); !strings.Contains(f.Stack, "runReceiver") {
		t.Errorf("recorded stack %q, want the panic's", f.Stack)
	}
	if err := run(t, c, srv.URL+"/hooks", testTask()); err != nil {
		t.Errorf("after the panic: %v", err)
	}
}

// Requests that do not pass Verify never reach the function.
func TestReceiverVerifiesFirst(t *testing.T) {
	var calls atomic.Int32
	h := Receiver(secret, 0, func(context.Context, *Message) error {
		calls.Add(1)
		return nil
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(`{"type":"rdq.task"}`)))
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "not signed") {
		t.Errorf("unsigned: %d %q", rec.Code, rec.Body.String())
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	other := newCaller(t, Config{Secret: []byte("another-secret-of-16-bytes-or-more")})
	err := run(t, other, srv.URL+"/hooks", testTask())
	if !rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "http_401" {
		t.Errorf("signed with another secret: %v", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the function ran %d times", n)
	}
}

func TestValidateSecret(t *testing.T) {
	for s, want := range map[string]string{
		"0123456789abcdef": "",
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")): "",
		"short":                            "the signing secret is 5 bytes; use at least 16 random bytes",
		"whsec_c2hvcnQ=":                   "the signing secret is 5 bytes",
		"whsec_not base64":                 "a whsec_ secret must be followed by standard base64",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "the signing secret has only 1 distinct byte values in 32 bytes",
		"abcabcabcabcabcabcabcabc":         "only 3 distinct byte values",
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32)): "only 1 distinct byte values",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw":                       "",
	} {
		err := ValidateSecret([]byte(s))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, rdq.ErrInvalid)) {
			t.Errorf("ValidateSecret(%q) = %v, want %q", s, err, want)
		}
	}
}
