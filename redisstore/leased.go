package redisstore

import (
	"sync"

	"github.com/srjn45/rdq"
)

// maxLeased bounds the tasks a store remembers the queue of; past it, a
// claim's tasks are not remembered and their finishes look the queue up.
const maxLeased = 1 << 18

// leased remembers the queue of each task this store claimed, until it
// finishes it, so a finish reaches the task's hash without reading the
// ID index first. It is a hint: the finish script checks that the task
// is in the queue named and looks it up when it is not (a task claimed by
// another store, or not remembered).
type leased struct {
	mu sync.Mutex
	q  map[rdq.ID]string
}

// add remembers the queues of tasks.
func (l *leased) add(tasks []*rdq.Task) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q == nil {
		l.q = make(map[rdq.ID]string)
	}
	for _, t := range tasks {
		if len(l.q) >= maxLeased {
			return
		}
		l.q[t.ID] = t.Queue
	}
}

// take returns the queue remembered for task id ("" when none) and
// forgets it.
func (l *leased) take(id rdq.ID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.q[id]
	delete(l.q, id)
	return q
}

// peek returns the queue of a task this store claimed, or "".
func (l *leased) peek(id rdq.ID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.q[id]
}
