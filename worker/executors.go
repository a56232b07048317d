package worker

import "sync"

// executors runs executions on goroutines it reuses: a goroutine that has
// run one waits for the next instead of exiting. A new goroutine starts
// with a small stack that an execution grows (tracing, classification,
// the handler); reusing one keeps the grown stack, which saves a
// measurable share of a busy worker's CPU. A goroutine stays only while
// the worker runs, and there are never more than the executions that ran
// at once.
//
// An execution whose handler calls runtime.Goexit ends its goroutine (its
// deferred recording runs first); one abandoned at shutdown keeps its
// goroutine until its handler returns, then the goroutine exits.
type executors struct {
	work chan func() // to a goroutine waiting for its next execution

	mu      sync.Mutex
	stopped bool
	idle    sync.WaitGroup // goroutines waiting for work
}

// start prepares x; run may be called from then until stop.
func (x *executors) start() { x.work = make(chan func()) }

// run runs fn, an execution counted in execs, on a waiting goroutine or a
// new one, and marks it done in execs when it returns.
func (x *executors) run(execs *sync.WaitGroup, fn func()) {
	select {
	case x.work <- fn:
	default:
		go x.loop(execs, fn)
	}
}

func (x *executors) loop(execs *sync.WaitGroup, fn func()) {
	for {
		returned := false
		func() {
			defer func() {
				if !returned { // runtime.Goexit: this goroutine ends here
					execs.Done()
				}
			}()
			fn()
			returned = true
		}()
		// Waiting is registered before the execution is marked done, so
		// that stop, which runs once every execution is done or abandoned,
		// waits for this goroutine too.
		x.mu.Lock()
		if x.stopped {
			x.mu.Unlock()
			execs.Done()
			return
		}
		x.idle.Add(1)
		x.mu.Unlock()
		execs.Done()
		next, ok := <-x.work
		x.idle.Done()
		if !ok {
			return
		}
		fn = next
	}
}

// stop ends the waiting goroutines and waits until they have exited. No
// execution may start after it.
func (x *executors) stop() {
	x.mu.Lock()
	if !x.stopped && x.work != nil {
		close(x.work)
	}
	x.stopped = true
	x.mu.Unlock()
	x.idle.Wait()
}
