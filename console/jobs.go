package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/srjn45/rdq/dlq"
)

// maxJobs is how many bulk actions the console remembers (running ones
// are never forgotten).
const maxJobs = 200

// job is one bulk redrive or purge running in the background, so the page
// can show its progress.
type job struct {
	ID     string
	Op     string // "redrive" or "purge"
	Filter dlq.Filter
	Actor  string
	Reason string
	// Confirmed is the count the person confirmed; the action never
	// touches more.
	Confirmed int64
	Started   time.Time

	mu       sync.Mutex
	done     int64
	total    int64
	finished bool
	ended    time.Time
	err      error
	redrive  dlq.RedriveResult
	purge    dlq.PurgeResult
}

// jobState is a consistent copy of a job's progress, for a template.
type jobState struct {
	*job
	Done, Total int64
	Finished    bool
	Ended       time.Time
	Err         error
	Redrive     dlq.RedriveResult
	Purge       dlq.PurgeResult
	Percent     int
}

func (j *job) state() jobState {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := jobState{job: j, Done: j.done, Total: j.total, Finished: j.finished, Ended: j.ended, Err: j.err, Redrive: j.redrive, Purge: j.purge}
	if s.Total > 0 {
		s.Percent = int(min(100, s.Done*100/s.Total))
	} else if s.Finished {
		s.Percent = 100
	}
	return s
}

func (j *job) progress(done, total int64) {
	j.mu.Lock()
	j.done, j.total = done, total
	j.mu.Unlock()
}

type jobs struct {
	mu     sync.Mutex
	byID   map[string]*job
	order  []string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newJobs() *jobs {
	ctx, cancel := context.WithCancel(context.Background())
	return &jobs{byID: map[string]*job{}, ctx: ctx, cancel: cancel}
}

// start runs fn for j in the background.
func (js *jobs) start(j *job, fn func(ctx context.Context, j *job)) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	j.ID = hex.EncodeToString(b[:])
	js.mu.Lock()
	js.byID[j.ID] = j
	js.order = append(js.order, j.ID)
	js.forgetLocked()
	js.wg.Add(1)
	js.mu.Unlock()
	go func() {
		defer js.wg.Done()
		fn(js.ctx, j)
	}()
}

// forgetLocked drops the oldest finished jobs beyond maxJobs.
func (js *jobs) forgetLocked() {
	for len(js.order) > maxJobs {
		dropped := false
		for i, id := range js.order {
			if j := js.byID[id]; j.state().Finished {
				delete(js.byID, id)
				js.order = append(js.order[:i], js.order[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}

func (js *jobs) get(id string) (*job, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j, ok := js.byID[id]
	return j, ok
}

func (js *jobs) closeAll() {
	js.cancel()
	js.wg.Wait()
}
