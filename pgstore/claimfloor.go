package pgstore

import (
	"strings"
	"sync"
	"time"

	"github.com/srjn45/rdq"
)

// claimFloorFor is how long claims of one queue may start at a floor before
// one reads the queue from the front again.
const claimFloorFor = time.Second

// maxClaimFloors bounds the floors a Store keeps: one per queue and
// handler set it is asked to claim from.
const maxClaimFloors = 256

// claimFloors gives a one-queue claim the point of the queue's range of
// tasks_claim_idx to start at, so that it does not read the dead entries
// earlier claims left at the front.
//
// A claim that took all it asked for (a full answer) sets its queue's floor
// to the earliest due time among the tasks it took: every PENDING task due
// before it that the claim's snapshot saw was taken, or locked by another
// transaction. The next claims start at the floor and move it forward with
// each full answer. A task can still become due behind the floor: enqueued
// with a due time in the past or by a transaction that began before the
// claim, resumed, released, redriven, locked while claims passed it, or
// left by a claim whose lock outlived its snapshot. It is passed over, not
// lost: a claim that starts claimFloorFor (on the local clock) or more
// after the last read from the front reads from the front again, and a
// claim that finds fewer tasks than its limit from the floor on takes the
// rest from the front at once. So only a claim that finds at least its
// limit of due tasks from the floor on, within claimFloorFor of the last
// read from the front, passes over a task behind the floor; the slots it
// fills are then not free for that task until their tasks end.
//
// Once a backlog has drained, claims come back short and read from the
// front, dead entries included, until VACUUM removes them: the floor
// spares that read while the queue has a backlog and claims are frequent.
type claimFloors struct {
	now func() time.Time // the local clock, which times the reads from the front

	mu sync.Mutex
	m  map[string]claimFloor
}

type claimFloor struct {
	due   time.Time // earliest due time of the last full answer
	front time.Time // when a claim last read the queue from the front
}

func newClaimFloors() *claimFloors {
	return &claimFloors{now: time.Now, m: make(map[string]claimFloor)}
}

// floorKey names the floor of claims of queue restricted to handlers
// (none: every handler). A floor is only valid for claims that skip the
// same tasks, so each handler set has its own.
func floorKey(queue string, handlers []string) string {
	if len(handlers) == 0 {
		return queue
	}
	return queue + "\x00" + strings.Join(handlers, "\x00")
}

// start returns where the next claim of key starts: nil for the front.
// A nil *claimFloors (a Store bound to a caller's transaction) always
// claims from the front.
func (f *claimFloors) start(key string) *time.Time {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[key]
	if !ok || f.now().Sub(c.front) >= claimFloorFor {
		return nil
	}
	return &c.due
}

// record updates the floor of key after a claim that started at from (nil:
// the front), asked for limit tasks and took tasks, sorted by due time.
func (f *claimFloors) record(key string, from *time.Time, limit int, tasks []*rdq.Task) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(tasks) < limit {
		delete(f.m, key)
		return
	}
	c, ok := f.m[key]
	if !ok && from != nil {
		return // dropped meanwhile (a concurrent claim's short answer, or the bound on floors)
	}
	if from == nil {
		c.front = f.now()
	}
	c.due = tasks[0].NextAttemptAt
	if !ok && len(f.m) >= maxClaimFloors {
		clear(f.m)
	}
	f.m[key] = c
}
