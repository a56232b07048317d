package tasks_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/leakcheck"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// newStore returns a store on a fresh, migrated schema, dropped when the
// test ends.
func newStore(t *testing.T) *pgstore.Store {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	return st
}

func submit(t *testing.T, st store.Store, n int, task client.Task) []rdq.ID {
	t.Helper()
	c, err := client.New(client.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var ids []rdq.ID
	for range n {
		res, err := c.Submit(t.Context(), task)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	return ids
}

// onlyStore hides every capability but store.Store.
type onlyStore struct{ store.Store }

func TestNewNeedsTheCapability(t *testing.T) {
	st := newStore(t)
	if _, err := tasks.New(onlyStore{st}, tasks.Config{}); !errors.Is(err, tasks.ErrUnsupported) {
		t.Errorf("New on a store without LiveTasks: %v, want ErrUnsupported", err)
	}
	if _, err := tasks.New(nil, tasks.Config{}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("New(nil): %v, want rdq.ErrInvalid", err)
	}
}

func TestListPagesWithTokens(t *testing.T) {
	st := newStore(t)
	lt, err := tasks.New(st, tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := submit(t, st, 7, client.Task{Queue: "emails", Handler: "send", Delay: time.Hour})
	submit(t, st, 3, client.Task{Queue: "other", Handler: "send", Delay: time.Hour})
	ctx := t.Context()
	var got []rdq.ID
	var token string
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("listing did not end")
		}
		page, err := lt.List(ctx, store.StatePending, tasks.Filter{Queue: "emails"}, tasks.ListOptions{PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			got = append(got, tk.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
		// A token is bound to its state and filter.
		if _, err := lt.List(ctx, store.StateRetrying, tasks.Filter{Queue: "emails"}, tasks.ListOptions{PageToken: token}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("token reused for another state: %v, want rdq.ErrInvalid", err)
		}
		if _, err := lt.List(ctx, store.StatePending, tasks.Filter{Queue: "other"}, tasks.ListOptions{PageToken: token}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("token reused for another filter: %v, want rdq.ErrInvalid", err)
		}
	}
	slices.SortFunc(got, func(a, b rdq.ID) int { return a.Time().Compare(b.Time()) })
	if len(got) != len(want) || !sameSet(got, want) {
		t.Errorf("paged listing = %v, want %v", got, want)
	}
	for _, bad := range []struct {
		state store.TaskState
		f     tasks.Filter
		opts  tasks.ListOptions
	}{
		{"dead", tasks.Filter{}, tasks.ListOptions{}},
		{store.StatePending, tasks.Filter{Queue: "bad queue!"}, tasks.ListOptions{}},
		{store.StatePending, tasks.Filter{Fingerprint: "xyz"}, tasks.ListOptions{}},
		{store.StatePending, tasks.Filter{}, tasks.ListOptions{PageSize: tasks.MaxPageSize + 1}},
		{store.StatePending, tasks.Filter{}, tasks.ListOptions{PageToken: "garbage"}},
	} {
		if _, err := lt.List(ctx, bad.state, bad.f, bad.opts); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("List(%q, %+v, %+v): %v, want rdq.ErrInvalid", bad.state, bad.f, bad.opts, err)
		}
	}
}

func sameSet(a, b []rdq.ID) bool {
	m := map[rdq.ID]int{}
	for _, id := range a {
		m[id]++
	}
	for _, id := range b {
		m[id]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestCancelGoesToTheDLQ(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	lt, err := tasks.New(st, tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids := submit(t, st, 2, client.Task{Queue: "orders", Handler: "ship", Delay: time.Hour})
	keyed := submit(t, st, 1, client.Task{Queue: "orders", Handler: "ship", IdempotencyKey: "order-9", Delay: time.Hour})[0]

	for _, c := range []tasks.Change{{Reason: "no actor"}, {Actor: "alice"}, {Actor: "alice", Reason: "bad\x00text"}} {
		if _, err := lt.Cancel(ctx, ids, c); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("Cancel with %+v: %v, want rdq.ErrInvalid", c, err)
		}
	}
	if _, err := lt.Cancel(ctx, nil, tasks.Change{Actor: "a", Reason: "r"}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("Cancel of nothing: %v, want rdq.ErrInvalid", err)
	}

	got, err := lt.ByKey(ctx, "orders", "order-9")
	if err != nil || got.ID != keyed {
		t.Fatalf("ByKey = %v, %v; want %s", got, err, keyed)
	}
	errs, err := lt.Cancel(ctx, []rdq.ID{got.ID, ids[0], rdq.NewID()}, tasks.Change{Actor: "alice", Reason: "order withdrawn"})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], store.ErrNotFound) {
		t.Fatalf("Cancel errors = %v", errs)
	}
	errs, err = lt.RetryNow(ctx, []rdq.ID{ids[0], ids[1]}, tasks.Change{Actor: "bob", Reason: "upstream fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], store.ErrNotPending) || errs[1] != nil {
		t.Fatalf("RetryNow errors = %v; want the cancelled one not pending", errs)
	}

	q, err := dlq.New(st, dlq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := q.List(ctx, dlq.Filter{Queue: "orders", ErrorType: rdq.CancelledErrorType}, dlq.ListOptions{})
	if err != nil || len(page.Tasks) != 2 {
		t.Fatalf("cancelled tasks in the DLQ: %d, %v; want 2", len(page.Tasks), err)
	}
	d, err := lt.Show(ctx, keyed)
	if err != nil {
		t.Fatal(err)
	}
	last := d.Attempts[len(d.Attempts)-1]
	if last.Outcome != rdq.OutcomeCancelled || last.WorkerID != "alice" || last.Message != "order withdrawn" {
		t.Errorf("last attempt = %+v, want CANCELLED by alice with the reason", last)
	}
	audit, err := q.Audit(ctx, dlq.AuditQuery{Action: "cancel"})
	if err != nil || len(audit) != 1 || audit[0].Actor != "alice" || audit[0].Count != 2 {
		t.Errorf("cancel audit = %+v, %v", audit, err)
	}
	due, err := lt.List(ctx, store.StatePending, tasks.Filter{IDs: []rdq.ID{ids[1]}}, tasks.ListOptions{})
	if err != nil || len(due.Tasks) != 1 || due.Tasks[0].NextAttemptAt.After(time.Now()) {
		t.Errorf("the task made due now: %+v, %v", due.Tasks, err)
	}
	if _, err := lt.ByKey(ctx, "orders", ""); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("ByKey with an empty key: %v, want rdq.ErrInvalid", err)
	}
	if _, err := lt.ByKey(ctx, "orders", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ByKey of an unknown key: %v, want store.ErrNotFound", err)
	}
}

func TestListDueAfter(t *testing.T) {
	st := newStore(t)
	lt, err := tasks.New(st, tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	submit(t, st, 3, client.Task{Queue: "emails", Handler: "send"})
	later := submit(t, st, 4, client.Task{Queue: "emails", Handler: "send", Delay: time.Hour})
	ctx := t.Context()
	var got []rdq.ID
	var token string
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("listing did not end")
		}
		page, err := lt.List(ctx, store.StatePending, tasks.Filter{}, tasks.ListOptions{PageSize: 3, PageToken: token, DueAfter: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			got = append(got, tk.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if !sameSet(got, later) {
		t.Errorf("tasks due after a minute from now = %v, want the 4 delayed ones %v", got, later)
	}
	all, err := lt.List(ctx, store.StatePending, tasks.Filter{}, tasks.ListOptions{})
	if err != nil || len(all.Tasks) != 7 {
		t.Fatalf("without DueAfter: %d tasks, %v; want all 7", len(all.Tasks), err)
	}
	if _, err := lt.List(ctx, store.StateInFlight, tasks.Filter{}, tasks.ListOptions{DueAfter: time.Now()}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("DueAfter with in_flight: %v, want rdq.ErrInvalid", err)
	}
}
