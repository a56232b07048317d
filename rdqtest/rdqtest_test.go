package rdqtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/rdqtest"
	"github.com/srjn45/rdq/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunClassifies(t *testing.T) {
	errDown := errors.New("smtp relay down")
	policy := rdq.Policy{MaxAttempts: 3, InitialBackoff: time.Second, Multiplier: 2, Jitter: rdq.NoJitter}
	for _, tc := range []struct {
		name    string
		h       worker.Handler
		task    rdq.Task
		opts    rdqtest.Options
		check   func(rdqtest.Result) bool
		outcome rdq.Outcome
	}{
		{"success", func(context.Context, *rdq.Task) error { return nil }, rdq.Task{}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool { return r.Succeeded() && r.Failure == (rdq.Failure{}) && r.Err == nil }, rdq.OutcomeSuccess},
		{"retry on the policy's backoff", func(context.Context, *rdq.Task) error { return errDown }, rdq.Task{Attempts: 1}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool {
				return r.Retried() && r.RetryIn == 2*time.Second && errors.Is(r.Err, errDown) && r.Failure.Message == "smtp relay down"
			}, rdq.OutcomeRetryableFailure},
		{"retry after", func(context.Context, *rdq.Task) error { return rdq.RetryAfter(42*time.Second, errDown) }, rdq.Task{}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool { return r.Retried() && r.RetryIn == 42*time.Second }, rdq.OutcomeRetryableFailure},
		{"attempts exhausted", func(context.Context, *rdq.Task) error { return errDown }, rdq.Task{Attempts: 2}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool { return r.Dead() && !r.Permanent() }, rdq.OutcomeRetryableFailure},
		{"permanent", func(context.Context, *rdq.Task) error { return rdq.Permanent(errDown) }, rdq.Task{}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool { return r.Dead() && r.Permanent() }, rdq.OutcomePermanentFailure},
		{"classified permanent", func(context.Context, *rdq.Task) error { return errDown },
			rdq.Task{}, rdqtest.Options{Policy: rdq.Policy{Classify: func(error) rdq.Class { return rdq.ClassPermanent }}},
			func(r rdqtest.Result) bool { return r.Dead() && r.Permanent() }, rdq.OutcomePermanentFailure},
		{"panic", func(context.Context, *rdq.Task) error { panic("nil map") }, rdq.Task{}, rdqtest.Options{Policy: policy},
			func(r rdqtest.Result) bool {
				return r.Retried() && r.Panicked() && strings.Contains(r.Failure.Stack, "rdqtest_test.go") && r.Err == nil
			}, rdq.OutcomeRetryableFailure},
		{"timeout", func(ctx context.Context, _ *rdq.Task) error { <-ctx.Done(); return ctx.Err() }, rdq.Task{},
			rdqtest.Options{Policy: policy, Timeout: 20 * time.Millisecond},
			func(r rdqtest.Result) bool {
				return r.Retried() && r.TimedOut() && r.Duration >= 20*time.Millisecond && strings.Contains(r.Failure.Message, "20ms")
			}, rdq.OutcomeRetryableFailure},
		{"custom fingerprint", func(context.Context, *rdq.Task) error { return errDown }, rdq.Task{},
			rdqtest.Options{Policy: rdq.Policy{Fingerprint: func(string, string) string { return "mail" }}},
			func(r rdqtest.Result) bool {
				return r.Failure.Fingerprint == (rdq.Policy{Fingerprint: func(string, string) string { return "mail" }}).Describe(errDown).Fingerprint
			}, rdq.OutcomeRetryableFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := rdqtest.Run(t, tc.h, tc.task, tc.opts)
			if res.Outcome != tc.outcome || !tc.check(res) {
				t.Errorf("Run = %+v (%s)", res, res)
			}
		})
	}
}

// The handler sees the task as a worker would give it: the payload, the
// attempt number, a lease token, and values of the options' context.
func TestRunGivesTheTask(t *testing.T) {
	type key struct{}
	var seen *rdq.Task
	var value any
	res := rdqtest.Run(t, func(ctx context.Context, task *rdq.Task) error {
		seen, value = task, ctx.Value(key{})
		return nil
	}, rdq.Task{Queue: "emails", Handler: "send", Payload: []byte("p"), Attempts: 2},
		rdqtest.Options{Context: context.WithValue(context.Background(), key{}, "v")})
	if !res.Succeeded() || seen == nil || string(seen.Payload) != "p" || seen.NextAttempt() != 3 ||
		seen.Queue != "emails" || seen.Handler != "send" || seen.LeaseToken == 0 || value != "v" {
		t.Errorf("result %s; handler saw %+v and context value %v", res, seen, value)
	}
}

func TestStoreRecordsSubmissions(t *testing.T) {
	st := rdqtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, task := range []client.Task{
		{Queue: "emails", Handler: "send", Payload: []byte(`{"user":1}`), IdempotencyKey: "u1"},
		{Queue: "emails", Handler: "send", Payload: []byte(`{"user":1}`), IdempotencyKey: "u1"}, // duplicate
		{Queue: "sms", Handler: "send", Payload: []byte(`{"user":2}`), FirstFailure: errors.New("carrier down")},
	} {
		if _, err := c.Submit(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(st.Submitted(t, "")); n != 2 {
		t.Errorf("%d submissions recorded, want 2 (the duplicate inserted nothing)", n)
	}
	sub := st.RequireSubmitted(t, "sms", []byte(`{"user":2}`))
	if len(sub.Attempts) != 1 || sub.Attempts[0].Message != "carrier down" || sub.Task.Attempts != 1 {
		t.Errorf("sms submission %+v", sub)
	}
	st.RequireNotSubmitted(t, "push")

	// The helpers fail the test when the check fails.
	ft := &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		st.RequireSubmitted(ft, "emails", []byte(`{"user":9}`))
	}()
	if !ft.failed || !strings.Contains(ft.msg, `{"user":1}`) {
		t.Errorf("RequireSubmitted of a missing payload: failed %v, message %q", ft.failed, ft.msg)
	}
	ft = &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		st.RequireNotSubmitted(ft, "emails")
	}()
	if !ft.failed {
		t.Error("RequireNotSubmitted of a queue with tasks did not fail")
	}
}

// fakeTB records a Fatalf instead of failing the real test.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = strings.TrimSpace(strings.ReplaceAll(format, "%q", "")) + " " + strings.TrimSpace(fmtArgs(args))
	panic("fatal")
}

func fmtArgs(args []any) string {
	var b strings.Builder
	for _, a := range args {
		switch v := a.(type) {
		case []string:
			b.WriteString(strings.Join(v, " "))
		case []byte:
			b.Write(v)
		case string:
			b.WriteString(v)
		}
		b.WriteByte(' ')
	}
	return b.String()
}
