package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Bounds of the completer's retries of a result that could not be written.
const (
	// finishRetryMin and finishRetryMax bound the backoff between tries.
	finishRetryMin = 50 * time.Millisecond
	finishRetryMax = 2 * time.Second
	// finishRetryAfterStop bounds how long a stopping worker keeps
	// retrying results (their leases bound it too).
	finishRetryAfterStop = 15 * time.Second
)

// finishItem is one execution's result on its way to the store.
type finishItem struct {
	e       *execution
	c       store.Completion
	d       rdq.Decision
	failure rdq.Failure
	dur     time.Duration
	// snooze: c (StatusPending, RetryIn, no attempt) is written with
	// store.Snoozer instead of Finish.
	snooze bool
	// inPlace, when set, makes c a retry kept in place: it is written
	// with store.InPlaceRetrier instead of Finish, and the store's answer
	// is sent on inPlace (buffered) once the result is written or given
	// up.
	inPlace chan<- inPlaceReply

	tries int       // failed writes so far
	next  time.Time // when to try again, after a failed write
	// sent is when the first failed write of a retry kept in place was
	// sent: if it was applied, its lease started no earlier.
	sent time.Time
	// replaced is set once the attempt's failure was replaced by a plain
	// description because the store refused it as invalid.
	replaced bool
}

// inPlaceReply is the answer to a retry kept in place: the task leased
// again for its next attempt, or nil when the task was left waiting (its
// queue or handler paused, the worker stopping) or the result could not be
// written.
type inPlaceReply struct {
	task *rdq.Task
	// sent is when the write that kept the task was sent: the earliest
	// moment its new lease can have started.
	sent time.Time
	// retryIn is the retry's delay, which the worker waits out before
	// running it.
	retryIn time.Duration
}

// completer batches the results of executions into Finish calls: it writes
// when batch results are waiting or the oldest has waited interval. A
// result that could not be written (the store unreachable, or refusing
// that one item) is tried again with backoff, in later batches beside new
// results, for as long as the worker still holds the task's lease; only
// then is it given up, logged and counted.
type completer struct {
	w        *Worker
	batch    int
	interval time.Duration

	mu     sync.RWMutex
	closed bool
	ch     chan finishItem
}

func newCompleter(w *Worker, batch int, interval time.Duration) *completer {
	return &completer{w: w, batch: batch, interval: interval, ch: make(chan finishItem, 2*batch)}
}

// add queues a result, blocking while the queue is full. It returns false,
// dropping the result, once the completer is closed.
func (c *completer) add(it finishItem) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.ch <- it
	return true
}

// close stops accepting results; run writes those queued and returns.
func (c *completer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
}

// completerFlushes is how many batches the completer writes at once. A
// batch's statement takes the store a while; with a second one written
// meanwhile, the results that arrive during a write wait for the store's
// capacity rather than for that write to end.
const completerFlushes = 2

// flushed is the end of one batch's write: its buffer, free again, and the
// items to try again.
type flushed struct {
	buf   []finishItem
	retry []finishItem
}

func (c *completer) run() {
	defer c.w.bg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var retry []finishItem
	var stopDeadline time.Time
	open := true
	// free holds the batch buffers not being written; a buffer is handed to
	// the goroutine that writes it and comes back on done.
	free := make([][]finishItem, 0, completerFlushes)
	for range completerFlushes {
		free = append(free, make([]finishItem, 0, c.batch))
	}
	done := make(chan flushed, completerFlushes)
	writing := 0
	landed := func(f flushed) {
		writing--
		retry = append(retry, f.retry...)
		free = append(free, f.buf[:0])
	}
	for open || len(retry) > 0 || writing > 0 {
		if len(free) == 0 {
			landed(<-done)
			continue
		}
		if !open && stopDeadline.IsZero() {
			stopDeadline = time.Now().Add(finishRetryAfterStop)
		}
		buf := free[len(free)-1]
		retry, buf = c.takeDue(retry, buf, time.Now(), stopDeadline)
		if len(buf) == 0 {
			// Wait for a new result, the next retry or a write's end.
			var wake <-chan time.Time
			if len(retry) > 0 {
				timer.Reset(time.Until(earliest(retry)))
				wake = timer.C
			}
			var in <-chan finishItem
			if open {
				in = c.ch
			}
			if in == nil && wake == nil && writing == 0 {
				break
			}
			select {
			case it, ok := <-in:
				if !ok {
					open = false
				} else {
					buf = append(buf, it)
				}
			case <-wake:
			case f := <-done:
				landed(f)
			}
			timer.Stop()
			if len(buf) == 0 {
				continue
			}
		}
		if open && len(buf) < c.batch {
			timer.Reset(c.interval)
		collect:
			for len(buf) < c.batch {
				select {
				case it, ok := <-c.ch:
					if !ok {
						open = false
						break collect
					}
					buf = append(buf, it)
				case <-timer.C:
					break collect
				}
			}
			timer.Stop()
		}
		free = free[:len(free)-1]
		writing++
		go func() {
			r := c.flushIsolating(buf)
			clear(buf) // drop the references of the items written
			done <- flushed{buf: buf, retry: r}
		}()
	}
}

// flushIsolating writes buf in one Finish call, except the items whose
// writes failed more than once, which are written each on its own: an item
// that makes the whole call fail (a store bug, a value the store chokes on)
// then holds back no other result.
func (c *completer) flushIsolating(buf []finishItem) (retry []finishItem) {
	batch := buf[:0:0]
	if !slices.ContainsFunc(buf, func(it finishItem) bool { return it.tries >= 2 }) {
		batch = buf
	} else {
		for _, it := range buf {
			if it.tries < 2 {
				batch = append(batch, it)
				continue
			}
			retry = append(retry, c.flush([]finishItem{it})...)
		}
	}
	if len(batch) > 0 {
		retry = append(retry, c.flush(batch)...)
	}
	return retry
}

// takeDue moves the items of retry due at now into buf (up to the batch
// size) and gives up those whose lease has expired, or all of them once a
// stopping worker's deadline has passed.
func (c *completer) takeDue(retry, buf []finishItem, now, stopDeadline time.Time) (rest, out []finishItem) {
	rest = retry[:0]
	for _, it := range retry {
		switch {
		case !c.w.leases.leaseValid(it.e, now) || (!stopDeadline.IsZero() && now.After(stopDeadline)):
			c.giveUp(it)
		case !it.next.After(now) && len(buf) < c.batch:
			buf = append(buf, it)
		default:
			rest = append(rest, it)
		}
	}
	return rest, buf
}

func earliest(items []finishItem) time.Time {
	t := items[0].next
	for _, it := range items[1:] {
		if it.next.Before(t) {
			t = it.next
		}
	}
	return t
}

// giveUp drops a result the worker can no longer write.
func (c *completer) giveUp(it finishItem) {
	w := c.w
	w.leases.remove(it.e)
	it.answer(nil, time.Time{})
	w.metrics.resultsDropped.WithLabelValues(it.e.q.name).Inc()
	w.logTask(slog.LevelError, "gave up writing the result: the lease expired first; the task will be reclaimed and run again", it.e,
		slog.String("outcome", string(it.d.Outcome)), slog.Int("tries", it.tries))
}

// flush writes items, each kind in one call (Finish, Snooze, RetryInPlace),
// and logs each task's transition. It returns the items to try again: all
// of a call's items if it failed as a whole, else those the store failed
// individually. A result whose lease was lost is logged and dropped: the
// task belongs to a newer execution.
func (c *completer) flush(items []finishItem) (retry []finishItem) {
	// Items are grouped by kind in place: finishes, then retries kept in
	// place, then snoozes.
	kind := func(it *finishItem) int {
		switch {
		case it.snooze:
			return 2
		case it.inPlace != nil:
			return 1
		}
		return 0
	}
	if slices.ContainsFunc(items, func(it finishItem) bool { return kind(&it) > 0 }) {
		slices.SortStableFunc(items, func(a, b finishItem) int { return kind(&a) - kind(&b) })
	}
	from := func(k int) int {
		if i := slices.IndexFunc(items, func(it finishItem) bool { return kind(&it) >= k }); i >= 0 {
			return i
		}
		return len(items)
	}
	i1, i2 := from(1), from(2)
	finished, kept, snoozed := items[:i1], items[i1:i2], items[i2:]
	// The kinds are written at once, each on a connection of its own.
	var snoozes, retries, finishes writeResult
	var wg sync.WaitGroup
	write := func(items []finishItem, r *writeResult, f func([]finishItem) writeResult) {
		if len(items) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				*r = f(items)
			}()
		}
	}
	write(snoozed, &snoozes, c.writeSnoozes)
	write(kept, &retries, c.writeRetries)
	write(finished, &finishes, c.writeFinishes)
	wg.Wait()
	if len(snoozed) > 0 {
		retry = append(retry, c.apply(snoozed, snoozes)...)
	}
	if len(kept) > 0 {
		retry = append(retry, c.apply(kept, retries)...)
	}
	if len(finished) > 0 {
		retry = append(retry, c.apply(finished, finishes)...)
	}
	return retry
}

// writeFinishes writes items in one Finish call.
func (c *completer) writeFinishes(items []finishItem) writeResult {
	w := c.w
	comps := make([]store.Completion, len(items))
	for i, it := range items {
		comps[i] = it.c
	}
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	errs, err := w.store.Finish(ctx, store.FinishParams{Completions: comps})
	cancel()
	if err == nil && len(errs) != len(comps) {
		err = fmt.Errorf("worker: store returned %d results finishing %d tasks", len(errs), len(comps))
	}
	if err != nil {
		w.log.Warn("finish failed; retrying while the leases last", slog.Int("tasks", len(comps)), slog.Any("error", err))
	}
	return writeResult{errs: errs, err: err}
}

// writeRetries writes retries kept in place with RetryInPlace: one call per
// lease duration among their queues (usually one).
func (c *completer) writeRetries(items []finishItem) writeResult {
	w := c.w
	r := writeResult{errs: make([]error, len(items)), tasks: make([]*rdq.Task, len(items)), sent: time.Now()}
	byLease := map[time.Duration][]int{}
	var leases []time.Duration
	for i, it := range items {
		if _, ok := byLease[it.e.q.lease]; !ok {
			leases = append(leases, it.e.q.lease)
		}
		byLease[it.e.q.lease] = append(byLease[it.e.q.lease], i)
	}
	for _, lease := range leases {
		idx := byLease[lease]
		comps := make([]store.Completion, len(idx))
		for k, i := range idx {
			comps[k] = items[i].c
		}
		ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
		results, err := w.retrier.RetryInPlace(ctx, store.RetryInPlaceParams{Retries: comps, Lease: lease})
		cancel()
		if err == nil && len(results) != len(comps) {
			err = fmt.Errorf("worker: store returned %d results retrying %d tasks in place", len(results), len(comps))
		}
		if err != nil {
			w.log.Warn("retry in place failed; retrying while the leases last", slog.Int("tasks", len(comps)), slog.Any("error", err))
			return writeResult{err: err, sent: r.sent}
		}
		for k, i := range idx {
			r.errs[i], r.tasks[i] = results[k].Err, results[k].Task
		}
	}
	return r
}

// writeResult is what the store said to a write of items: err for the
// call as a whole, else errs per item; for retries kept in place, the
// tasks kept (nil for those left waiting) and when the write was sent (set
// when the call failed too: it may have been applied).
type writeResult struct {
	errs  []error
	err   error
	tasks []*rdq.Task
	sent  time.Time
}

// writeSnoozes writes snoozed items in one Snooze call.
func (c *completer) writeSnoozes(items []finishItem) writeResult {
	w := c.w
	sn := make([]store.SnoozeItem, len(items))
	for i, it := range items {
		sn[i] = store.SnoozeItem{Lease: it.c.Lease, Delay: it.c.RetryIn}
	}
	ctx, cancel := context.WithTimeout(w.baseCtx, storeCallTimeout)
	errs, err := w.snoozer.Snooze(ctx, store.SnoozeParams{Snoozes: sn})
	cancel()
	if err == nil && len(errs) != len(sn) {
		err = fmt.Errorf("worker: store returned %d results snoozing %d tasks", len(errs), len(sn))
	}
	if err != nil {
		w.log.Warn("snooze failed; retrying while the leases last", slog.Int("tasks", len(sn)), slog.Any("error", err))
	}
	return writeResult{errs: errs, err: err}
}

// apply handles the store's answer r to a write of items, and returns the
// items to try again.
func (c *completer) apply(items []finishItem, r writeResult) (retry []finishItem) {
	w := c.w
	err, errs := r.err, r.errs
	now := time.Now()
	for i, it := range items {
		itemErr := err
		if err == nil {
			itemErr = errs[i]
		}
		var written bool
		var keptTask *rdq.Task
		if err == nil && errors.Is(itemErr, store.ErrLeaseLost) && it.tries > 0 {
			written, keptTask = c.writtenBefore(it)
		}
		switch {
		case itemErr == nil:
			w.leases.remove(it.e)
			var task *rdq.Task
			if r.tasks != nil {
				task = r.tasks[i]
			}
			c.recorded(it, task, r.sent)
		case written:
			// An earlier try was written but its reply was lost: the
			// lease is gone because this very result ended it.
			w.leases.remove(it.e)
			w.logTask(slog.LevelInfo, "the result had been written by an earlier try whose reply was lost", it.e,
				slog.Int("tries", it.tries))
			c.recorded(it, keptTask, it.sent)
		case errors.Is(itemErr, store.ErrLeaseLost):
			w.leases.remove(it.e)
			w.metrics.leaseLost.WithLabelValues(it.e.q.name).Inc()
			w.logTask(slog.LevelWarn, "lease lost before the result was written; result discarded", it.e,
				slog.String("outcome", string(it.d.Outcome)))
			it.answer(nil, time.Time{})
		case err == nil && errors.Is(itemErr, rdq.ErrInvalid) && it.c.Attempt != nil && !it.replaced:
			// The store refused this item's record: record a plain
			// description of the refusal instead, at once.
			w.logTask(slog.LevelError, "the store refused the attempt's record; recording a plain failure instead", it.e,
				slog.String("outcome", string(it.d.Outcome)), slog.Any("error", itemErr))
			it.replaced = true
			a := *it.c.Attempt
			a.Failure = rdq.Describe(&unstorableError{err: itemErr})
			if a.Outcome == rdq.OutcomeSuccess {
				a.Failure = rdq.Failure{}
			}
			it.c.Attempt = &a
			it.failure = a.Failure
			it.next = now
			retry = append(retry, it)
		default:
			if err == nil {
				w.logTask(slog.LevelWarn, "writing the result failed; retrying while the lease lasts", it.e,
					slog.String("outcome", string(it.d.Outcome)), slog.Any("error", itemErr))
			}
			if it.tries == 0 {
				it.sent = r.sent
			}
			it.tries++
			it.next = now.Add(min(finishRetryMin<<min(it.tries-1, 10), finishRetryMax))
			retry = append(retry, it)
		}
	}
	return retry
}

// unstorableError replaces an attempt's failure that the store refused.
type unstorableError struct{ err error }

func (e *unstorableError) Error() string {
	return "the store refused the attempt's original record: " + e.err.Error()
}

// ErrorType implements the error-type contract: "result_unstorable".
func (e *unstorableError) ErrorType() string { return "result_unstorable" }

// answer sends the answer to a retry kept in place, if it is one.
func (it finishItem) answer(task *rdq.Task, sent time.Time) {
	if it.inPlace != nil {
		it.inPlace <- inPlaceReply{task: task, sent: sent, retryIn: it.c.RetryIn}
	}
}

// recorded logs and counts a result the store accepted and, for a retry
// kept in place, answers it with task, the task leased again (nil when it
// was left waiting) by a write sent at sent. A stopping worker starts no
// new attempt: it gives a kept task back, due at once, with no attempt
// counted.
func (c *completer) recorded(it finishItem, task *rdq.Task, sent time.Time) {
	w := c.w
	if it.inPlace == nil || task == nil {
		w.recordFinish(it)
		it.answer(nil, time.Time{})
		return
	}
	w.metrics.attempt(it.e.q, it.d.Outcome).Inc()
	w.metrics.retriedInPlace.WithLabelValues(it.e.q.name).Inc()
	w.logTask(slog.LevelWarn, "attempt failed; retry scheduled", it.e,
		slog.String("outcome", string(it.d.Outcome)),
		slog.Duration("retry_in", it.c.RetryIn),
		slog.Bool("in_place", true),
		slog.String("error_type", it.failure.Type),
		slog.String("error", it.failure.Message))
	if w.stopped() {
		w.releaseUnstarted(it.e.q, []*rdq.Task{task}, "releasing a task kept for its retry while stopping")
		task = nil
	}
	it.answer(task, sent)
}

// recordFinish logs and counts a result the store accepted.
func (w *Worker) recordFinish(it finishItem) {
	q := it.e.q.name
	if it.c.Attempt != nil {
		w.metrics.attempt(it.e.q, it.d.Outcome).Inc()
	}
	switch {
	case it.snooze:
		w.metrics.snoozed.WithLabelValues(q).Inc()
		w.logTask(slog.LevelInfo, "task snoozed", it.e, slog.Duration("retry_in", it.c.RetryIn))
		return
	}
	switch it.c.Status {
	case rdq.StatusSucceeded:
		w.logTask(slog.LevelInfo, "task succeeded", it.e, slog.Duration("duration", it.dur))
	case rdq.StatusPending:
		w.logTask(slog.LevelWarn, "attempt failed; retry scheduled", it.e,
			slog.String("outcome", string(it.d.Outcome)),
			slog.Duration("retry_in", it.c.RetryIn),
			slog.String("error_type", it.failure.Type),
			slog.String("error", it.failure.Message))
	case rdq.StatusDead:
		w.metrics.deadLettered.WithLabelValues(q).Inc()
		reason := "attempts exhausted"
		if it.d.Outcome == rdq.OutcomePermanentFailure {
			reason = "permanent failure"
		}
		w.logTask(slog.LevelError, "task dead-lettered", it.e,
			slog.String("reason", reason),
			slog.String("outcome", string(it.d.Outcome)),
			slog.String("error_type", it.failure.Type),
			slog.String("error", it.failure.Message))
	}
}

// writtenBefore reports whether the store already holds the result of it,
// written by an earlier write that committed but whose reply was lost, and,
// for a retry kept in place, returns the task as that write kept it (nil
// if it left the task waiting, or the kept lease has ended since). A result
// with an attempt left that attempt in the history, under the lease's
// token and with its outcome (only this execution held the token, and a
// reclaim records LEASE_EXPIRED); one without an attempt left the task in
// its status, still under that token. A kept task is IN_FLIGHT under the
// next token, owned by this worker: any later claim or reclaim takes a
// greater one. A read that fails answers no, and the result is reported
// lost as before.
func (c *completer) writtenBefore(it finishItem) (bool, *rdq.Task) {
	ctx, cancel := context.WithTimeout(c.w.baseCtx, storeCallTimeout)
	defer cancel()
	task, history, err := c.w.store.Get(ctx, it.c.ID)
	if err != nil {
		return false, nil
	}
	if it.c.Attempt == nil {
		return task.LeaseToken == it.c.Token && task.Status == it.c.Status, nil
	}
	for _, a := range history {
		if a.LeaseToken == it.c.Token && a.Outcome == it.c.Attempt.Outcome {
			if it.inPlace != nil && task.Status == rdq.StatusInFlight &&
				task.LeaseToken == it.c.Token+1 && task.LeaseOwner == c.w.id {
				return true, task
			}
			return true, nil
		}
	}
	return false, nil
}
