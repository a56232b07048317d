package pgstore_test

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
)

// floorClock is a settable clock for the claims' reads from the front.
type floorClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *floorClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *floorClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// floorEnv is a store whose claims of queue q read from the front on a
// clock the test sets.
type floorEnv struct {
	t     *testing.T
	ctx   context.Context
	s     *pgstore.Store
	clock *floorClock
}

func newFloorEnv(t *testing.T) *floorEnv {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, _ := pgtest.NewStore(t)
	clock := &floorClock{t: time.Now()}
	pgstore.SetClaimFloorClock(s, clock.now)
	return &floorEnv{t: t, ctx: ctx, s: s, clock: clock}
}

// enqueue adds n tasks of handler h to q, due shift from now (negative: in
// the past), and returns their IDs.
func (e *floorEnv) enqueue(n int, h string, shift time.Duration) []rdq.ID {
	e.t.Helper()
	var now *time.Time
	if shift != 0 {
		at := time.Now().Add(shift)
		now = &at
	}
	tasks := make([]store.NewTask, n)
	ids := make([]rdq.ID, n)
	for i := range tasks {
		ids[i] = rdq.NewID()
		tasks[i] = store.NewTask{ID: ids[i], Queue: "q", Handler: h, Payload: []byte("{}"), MaxAttempts: 3}
	}
	if _, err := e.s.Enqueue(e.ctx, store.EnqueueParams{Tasks: tasks, Now: now}); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func (e *floorEnv) claim(limit int, handlers ...string) []rdq.ID {
	e.t.Helper()
	got, err := e.s.Claim(e.ctx, store.ClaimParams{Queues: []string{"q"}, Handlers: handlers, Limit: limit, Lease: time.Minute, WorkerID: "w"})
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]rdq.ID, len(got))
	for i, tk := range got {
		ids[i] = tk.ID
	}
	return ids
}

// While a queue has a backlog, a task that becomes due behind the claims'
// floor waits for the next claim from the front, which comes once
// ClaimFloorFor has passed since the last one; claims from the floor do
// not postpone it.
func TestClaimBehindTheFloorWaitsForAReadFromTheFront(t *testing.T) {
	t.Parallel()
	for _, handlers := range [][]string{nil, {"h"}} {
		e := newFloorEnv(t)
		e.enqueue(40, "h", -time.Minute)
		if got := e.claim(10, handlers...); len(got) != 10 {
			t.Fatalf("first claim took %d tasks, want 10", len(got))
		}
		late := e.enqueue(1, "h", -time.Hour)[0]
		for _, step := range []time.Duration{0, pgstore.ClaimFloorFor * 6 / 10} {
			e.clock.advance(step)
			if got := e.claim(10, handlers...); len(got) != 10 || slices.Contains(got, late) {
				t.Fatalf("handlers %v: a full claim at the floor took %d tasks, the one behind it %v; want 10 without it", handlers, len(got), slices.Contains(got, late))
			}
		}
		e.clock.advance(pgstore.ClaimFloorFor * 4 / 10)
		if got := e.claim(10, handlers...); len(got) != 10 || !slices.Contains(got, late) {
			t.Fatalf("handlers %v: the claim %s after the read from the front took %d tasks, the one behind the floor %v; want 10 with it", handlers, pgstore.ClaimFloorFor, len(got), slices.Contains(got, late))
		}
	}
}

// A claim that finds fewer tasks than its limit from the floor on (no
// backlog) takes the rest, and no more, from the front at once.
func TestClaimBehindTheFloorIsTakenWhenTheBacklogEnds(t *testing.T) {
	t.Parallel()
	e := newFloorEnv(t)
	e.enqueue(15, "h", -time.Minute)
	if got := e.claim(10); len(got) != 10 {
		t.Fatalf("first claim took %d tasks, want 10", len(got))
	}
	late := e.enqueue(3, "h", -time.Hour)
	lateIn := func(ids []rdq.ID) int {
		n := 0
		for _, id := range late {
			if slices.Contains(ids, id) {
				n++
			}
		}
		return n
	}
	if got := e.claim(7); len(got) != 7 || lateIn(got) != 2 {
		t.Fatalf("the claim after the backlog took %d tasks, %d of them behind the floor; want 7: the 5 left from the floor on and 2 of the 3 behind it", len(got), lateIn(got))
	}
	if got := e.claim(10); len(got) != 1 || lateIn(got) != 1 {
		t.Fatalf("the next claim took %v, want the last task behind the floor", got)
	}
}

// A floor belongs to the handlers a claim names: a claim of other handlers
// starts at its own.
func TestClaimFloorIsPerHandlerSet(t *testing.T) {
	t.Parallel()
	e := newFloorEnv(t)
	b1 := e.enqueue(1, "b", -2*time.Minute)[0]
	e.enqueue(20, "a", -time.Minute)
	e.enqueue(2, "b", -30*time.Second)
	if got := e.claim(10, "a"); len(got) != 10 {
		t.Fatalf("claim of a took %d tasks, want 10", len(got))
	}
	if got := e.claim(1, "b"); len(got) != 1 || got[0] != b1 {
		t.Fatalf("claim of b took %v, want its oldest task %s", got, b1)
	}
}

// A claim that starts at a floor reads tasks_claim_idx from the floor on
// (an index condition), not from the front with the floor as a filter.
func TestClaimFromAFloorStartsTheIndexScanThere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _ := pgtest.NewStore(t)
	conn, err := pgtest.Pool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	cond := regexp.MustCompile(`Index Cond: .*next_attempt_at >= `)
	for _, handlers := range [][]string{nil, {"h1"}} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			sql, args := pgstore.ClaimFromQuery(s, "q", handlers, 10, time.Now())
			plan := explain(t, ctx, conn.Conn(), mode, sql, args)
			if !cond.MatchString(plan) {
				t.Errorf("handlers %v, %s: the floor is not an index condition:\n%s", handlers, mode, plan)
			}
		}
	}
}
