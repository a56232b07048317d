package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/worker"
)

// A queue's Policy.Fingerprint decides the fingerprint the worker records;
// a panic in it falls back to the default and hurts nothing.
func TestPolicyFingerprintUsedByWorker(t *testing.T) {
	e := newEnv(t)
	byTenant := fastPolicy(1)
	byTenant.Fingerprint = func(errorType, message string) string {
		tenant, _, _ := strings.Cut(message, ":")
		return "tenant " + tenant
	}
	broken := fastPolicy(1)
	broken.Fingerprint = func(string, string) string { panic("fingerprint bug") }
	e.newWorker(worker.Config{
		Queues: map[string]worker.QueueConfig{"custom": {Policy: byTenant}, "broken": {Policy: broken}},
	}, map[string]worker.Handler{
		"fail": func(ctx context.Context, task *rdq.Task) error {
			return rdq.Permanent(errors.New(string(task.Payload)))
		},
	})
	a := e.submit(client.Task{Queue: "custom", Handler: "fail", Payload: []byte("acme: order 1 failed")})
	b := e.submit(client.Task{Queue: "custom", Handler: "fail", Payload: []byte("acme: quota exceeded")})
	c := e.submit(client.Task{Queue: "broken", Handler: "fail", Payload: []byte("acme: order 1 failed")})
	ta, _ := e.waitStatus(a, rdq.StatusDead, 10*time.Second)
	tb, _ := e.waitStatus(b, rdq.StatusDead, 10*time.Second)
	tc, _ := e.waitStatus(c, rdq.StatusDead, 10*time.Second)
	if want := byTenant.Describe(errors.New("acme: whatever")).Fingerprint; ta.LastError.Fingerprint != want || tb.LastError.Fingerprint != want {
		t.Errorf("fingerprints %s and %s, want the policy's %s for both", ta.LastError.Fingerprint, tb.LastError.Fingerprint, want)
	}
	if want := rdq.Fingerprint("*errors.errorString", "acme: order 1 failed"); tc.LastError.Fingerprint != want {
		t.Errorf("panicking fingerprint function: recorded %s, want the default %s", tc.LastError.Fingerprint, want)
	}
}
