package rdqtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/rdqtest"
)

var errRateLimited = errors.New("429 too many requests")

// sendWelcome is the handler under test.
func sendWelcome(ctx context.Context, t *rdq.Task) error {
	if len(t.Payload) == 0 {
		return rdq.Permanent(errors.New("empty payload"))
	}
	return rdq.RetryAfter(30*time.Second, errRateLimited)
}

// A unit test of a handler: run it on a task and check how the worker
// would classify the attempt. No store is involved.
func ExampleRun() {
	t := newExampleT() // in a test, the test's *testing.T
	defer t.cleanup()
	res := rdqtest.Run(t, sendWelcome, rdq.Task{Payload: []byte(`{"user":42}`)}, rdqtest.Options{})
	fmt.Println(res.Retried(), res.RetryIn, errors.Is(res.Err, errRateLimited))

	res = rdqtest.Run(t, sendWelcome, rdq.Task{}, rdqtest.Options{})
	fmt.Println(res.Dead(), res.Permanent(), res.Failure.Message)
	// Output:
	// true 30s true
	// true true empty payload
}

// signUp is code under test that submits a task.
func signUp(ctx context.Context, c *client.Client, user int) error {
	_, err := c.Submit(ctx, client.Task{Queue: "emails", Handler: "send-welcome", Payload: fmt.Appendf(nil, `{"user":%d}`, user)})
	return err
}

// An integration test: a throwaway SQLite store records what the code
// under test submitted.
func ExampleStore_RequireSubmitted() {
	t := newExampleT() // in a test, the test's *testing.T
	defer t.cleanup()
	st := rdqtest.NewStore(t)
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := signUp(context.Background(), c, 42); err != nil {
		fmt.Println(err)
		return
	}
	sub := st.RequireSubmitted(t, "emails", []byte(`{"user":42}`))
	fmt.Println(sub.Task.Handler, sub.Task.Status)
	// Output: send-welcome PENDING
}

// exampleT stands in for the *testing.T of a real test, which examples do
// not have.
type exampleT struct {
	cleanups []func()
}

func newExampleT() *exampleT { return &exampleT{} }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }

func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "rdqtest-example")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A handler that is not ready yet snoozes: the task waits without spending
// an attempt. Past the policy's MaxSnoozes (here 2) a snooze counts as a
// failed attempt of type "snoozed".
func ExampleRun_snooze() {
	h := func(ctx context.Context, t *rdq.Task) error {
		return rdq.Snooze(time.Minute)
	}
	t := newExampleT() // in a test, the test's *testing.T
	defer t.cleanup()
	policy := rdq.Policy{MaxSnoozes: 2}
	res := rdqtest.Run(t, h, rdq.Task{}, rdqtest.Options{Policy: policy})
	fmt.Println(res)
	res = rdqtest.Run(t, h, rdq.Task{Snoozes: 2}, rdqtest.Options{Policy: policy})
	fmt.Println(res.Snoozed, res.Retried(), res.RetryIn, res.Failure.Type)
	// Output:
	// snoozed for 1m0s
	// false true 1m0s snoozed
}
