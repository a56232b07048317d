package crosslang

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/store"
)

// TestJavaListsLiveTasksAsGo: RdqAdmin.listTasks lists the tasks of each
// live state, of every queue and of one, held tasks included, in exactly
// the order and pages of pgstore's ListTasks.
func TestJavaListsLiveTasksAsGo(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(queue, handler string, delay time.Duration) {
		if _, err := c.Submit(ctx, client.Task{Queue: queue, Handler: handler, Delay: delay}); err != nil {
			t.Fatal(err)
		}
	}
	// Pending in a and b, some due at the same time (the id breaks the tie).
	for i := range 7 {
		submit("a", []string{"h", "g"}[i%2], time.Duration(i%3)*time.Hour)
		submit("b", "h", time.Duration(i%2)*time.Hour)
	}
	// Retrying, succeeded and in flight, in a and c.
	for _, q := range []string{"a", "c"} {
		for range 4 {
			submit(q, "k", 0)
		}
	}
	claimed, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"a", "c"}, Handlers: []string{"k"}, Limit: 8, Lease: time.Hour, WorkerID: "w"})
	if err != nil || len(claimed) != 8 {
		t.Fatalf("claimed %d (%v), want 8", len(claimed), err)
	}
	var comps []store.Completion
	inFlight := map[string]bool{}
	for i, tk := range claimed {
		if !inFlight[tk.Queue] {
			inFlight[tk.Queue] = true // one of each queue stays in flight
			continue
		}
		cp := store.Completion{Lease: store.Lease{ID: tk.ID, Token: tk.LeaseToken}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "w"}}
		if i%2 == 0 {
			cp.Status, cp.RetryIn = rdq.StatusPending, time.Duration(i)*time.Minute
			cp.Attempt = &store.AttemptRecord{Outcome: rdq.OutcomeRetryableFailure, WorkerID: "w",
				Failure: rdq.Failure{Type: "timeout", Message: "deadline exceeded", Fingerprint: rdq.Fingerprint("timeout", "deadline exceeded")}}
		}
		comps = append(comps, cp)
	}
	if _, err := st.Finish(ctx, store.FinishParams{Completions: comps}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PauseHandler(ctx, store.PauseHandlerParams{Queue: "a", Handler: "g", Actor: "alice", Reason: "held"}); err != nil {
		t.Fatal(err)
	}

	env := []string{"RDQ_DATABASE_URL=" + pgtest.URL(), "RDQ_SCHEMA=" + schema}
	args := []string{"list-tasks"}
	var wants [][]string
	for _, state := range []store.TaskState{store.StatePending, store.StateRetrying, store.StateInFlight, store.StateSucceeded} {
		for _, l := range []struct {
			queue string
			size  int
		}{{"-", 3}, {"a", 2}} {
			var want []string
			p := store.ListTasksParams{State: state, Limit: l.size}
			if l.queue != "-" {
				p.Filter.Queue = l.queue
			}
			for {
				page, err := st.ListTasks(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range page {
					want = append(want, tk.ID.String())
				}
				if len(page) < l.size {
					break
				}
				cur := store.TaskCursorOf(state, page[len(page)-1])
				p.After = &cur
			}
			if len(want) == 0 {
				t.Fatalf("Go lists no %s tasks of %s: the test would compare nothing", state, l.queue)
			}
			args = append(args, string(state), l.queue, strconv.Itoa(l.size))
			wants = append(wants, want)
		}
	}
	out := runJava(t, "AdminMain", t.TempDir(), env, "", args...)
	listings := strings.Split(strings.TrimSuffix(out, "--\n"), "--\n")
	if len(listings) != len(wants) {
		t.Fatalf("Java printed %d listings, want %d:\n%s", len(listings), len(wants), out)
	}
	for i, want := range wants {
		got := strings.Split(strings.TrimSpace(listings[i]), "\n")
		if !slices.Equal(got, want) {
			t.Errorf("listing %s %s in pages of %s:\nJava %v\nGo   %v", args[1+3*i], args[2+3*i], args[3+3*i], got, want)
		}
	}
}
