package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The task page shows a task's own attempt budget and timeout, and how
// often it snoozed.
func TestTaskPageShowsTaskBudget(t *testing.T) {
	e := newEnv(t, "")
	id := rdq.NewID()
	_, err := e.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{{
		ID: id, Queue: "emails", Handler: "send", MaxAttempts: 4, Timeout: 1500 * time.Millisecond,
		FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "validation", Message: "bad"}, WorkerID: "w"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.get(userAdmin, "/tasks/"+id.String())
	if r.status != 200 {
		t.Fatalf("task page: %d %s", r.status, r.body)
	}
	for _, want := range []string{
		"<dt>Max attempts</dt><dd>4 (the task's own, within the queue's limit)</dd>",
		"<dt>Timeout</dt><dd>1.5s (the task's own, within the queue's limit)</dd>",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("task page lacks %q:\n%s", want, r.body)
		}
	}
}
