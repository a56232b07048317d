package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultChartMaxAge is how old the overview's failure chart may be before
// a view recounts it, when Config.ChartMaxAge is zero.
const DefaultChartMaxAge = 15 * time.Second

// chartStaleFactor bounds how stale a chart a view may be shown while it
// is recounted in the background: up to this many times the maximum age.
// Older charts (a first view after a quiet spell) are recounted while the
// view waits, so nobody is shown an old picture as if it were current.
const chartStaleFactor = 4

// chartTimeout bounds one recount.
const chartTimeout = 30 * time.Second

// chart is one count of one of the overview's charts.
type chart[T any] struct {
	val   T
	start time.Time // the start of the first bucket
	at    time.Time // when it was counted, on the console's clock
}

// chartCache serves one of the overview's charts: the 24 h dead-per-hour
// chart, whose count is a range scan of every task that went dead in the
// last day (at a million dead tasks, tens of thousands of index entries,
// and a storm's worth in a storm), and the activity series, whose reads
// count the last minutes of attempt history. The cache recounts a chart at
// most once per maxAge with a single read whatever the number of viewers:
//
//   - a chart younger than maxAge is served as is;
//   - a chart up to chartStaleFactor × maxAge old, of the current hour, is
//     served while one background recount replaces it;
//   - otherwise (no chart yet, an older one, or a new hour began) the view
//     waits for the recount, which every concurrent view shares.
//
// The page shows when the chart was counted.
type chartCache[T any] struct {
	maxAge time.Duration
	count  func(ctx context.Context, start time.Time) (T, error)
	now    func() time.Time
	start  func(now time.Time) time.Time // the chart start for a clock reading
	logErr func(error)                   // a background recount's failure

	ctx    context.Context // the console's lifetime; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cur    *chart[T]
	flight *chartFlight // the recount running, if any
}

// chartFlight is one recount; done closes when it has finished.
type chartFlight struct {
	done chan struct{}
	err  error
}

func newChartCache[T any](maxAge time.Duration, now func() time.Time, start func(time.Time) time.Time,
	count func(ctx context.Context, start time.Time) (T, error), logErr func(error)) *chartCache[T] {
	ctx, cancel := context.WithCancel(context.Background())
	return &chartCache[T]{maxAge: maxAge, count: count, now: now, start: start, logErr: logErr, ctx: ctx, cancel: cancel}
}

// get returns the chart to show, recounting it as the rules above say.
func (cc *chartCache[T]) get(ctx context.Context) (chart[T], error) {
	now := cc.now()
	cc.mu.Lock()
	if cur := cc.cur; cur != nil && cur.start.Equal(cc.start(now)) {
		switch age := now.Sub(cur.at); {
		case age < cc.maxAge:
			cc.mu.Unlock()
			return *cur, nil
		case age < chartStaleFactor*cc.maxAge:
			cc.recountLocked()
			cc.mu.Unlock()
			return *cur, nil
		}
	}
	f := cc.recountLocked()
	cc.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return chart[T]{}, ctx.Err()
	}
	if f.err != nil {
		return chart[T]{}, f.err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return *cc.cur, nil
}

// recountLocked starts a recount unless one is running, and returns the
// running one. cc.mu is held.
func (cc *chartCache[T]) recountLocked() *chartFlight {
	if cc.flight != nil {
		return cc.flight
	}
	f := &chartFlight{done: make(chan struct{})}
	cc.flight = f
	cc.wg.Add(1)
	go func() {
		defer cc.wg.Done()
		at := cc.now()
		start := cc.start(at)
		ctx, cancel := context.WithTimeout(cc.ctx, chartTimeout)
		val, err := cc.count(ctx, start)
		cancel()
		cc.mu.Lock()
		if err == nil {
			cc.cur = &chart[T]{val: val, start: start, at: at}
		} else {
			f.err = fmt.Errorf("counting the failure chart: %w", err)
		}
		cc.flight = nil
		cc.mu.Unlock()
		close(f.done)
		if err != nil && !errors.Is(cc.ctx.Err(), context.Canceled) {
			// A view waiting for this recount shows the error too; one
			// served the stale chart meanwhile does not, so log it.
			cc.logErr(f.err)
		}
	}()
	return f
}

// close stops a recount in flight and waits for it.
func (cc *chartCache[T]) close() {
	cc.cancel()
	cc.wg.Wait()
}
