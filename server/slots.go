package server

import (
	"context"
	"sync"
)

// bodySlots bounds the REST requests with a body in flight per principal:
// each principal (by name) has perPrincipal places of its own, so the
// requests of one, however slow their bodies arrive, never make another's
// wait.
type bodySlots struct {
	perPrincipal int

	mu     sync.Mutex
	byName map[string]*principalSlots
	held   int // places held, over every principal
}

type principalSlots struct {
	free  chan struct{} // a token per place held
	users int           // requests holding or waiting for a place
}

func newBodySlots(perPrincipal int) *bodySlots {
	return &bodySlots{perPrincipal: perPrincipal, byName: map[string]*principalSlots{}}
}

// acquire waits for a place of principal's until ctx ends, and returns the
// function that frees it.
func (b *bodySlots) acquire(ctx context.Context, principal string) (release func(), err error) {
	b.mu.Lock()
	ps := b.byName[principal]
	if ps == nil {
		ps = &principalSlots{free: make(chan struct{}, b.perPrincipal)}
		b.byName[principal] = ps
	}
	ps.users++
	b.mu.Unlock()
	select {
	case ps.free <- struct{}{}:
	case <-ctx.Done():
		b.leave(principal, ps, false)
		return nil, ctx.Err()
	}
	b.mu.Lock()
	b.held++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			<-ps.free
			b.leave(principal, ps, true)
		})
	}, nil
}

// leave ends a request's use of ps, forgetting ps when nobody uses it.
func (b *bodySlots) leave(principal string, ps *principalSlots, held bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if held {
		b.held--
	}
	ps.users--
	if ps.users == 0 {
		delete(b.byName, principal)
	}
}

// inUse returns the places held, over every principal.
func (b *bodySlots) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}
