package server

import (
	"sync"
	"time"
)

// throttle is a token bucket per key: burst tokens, one more every every.
// It tracks at most max keys; when full, it forgets the keys whose bucket
// is full again, and keys it cannot place share one bucket.
type throttle struct {
	burst float64
	every time.Duration
	max   int

	mu      sync.Mutex
	buckets map[string]*bucket
	shared  bucket // of the keys that found no room
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newThrottle(burst int, every time.Duration, max int) *throttle {
	return &throttle{burst: float64(burst), every: every, max: max, buckets: map[string]*bucket{}, shared: bucket{tokens: float64(burst)}}
}

// refill brings b up to date at now.
func (t *throttle) refill(b *bucket, now time.Time) {
	if now.After(b.at) {
		b.tokens = min(t.burst, b.tokens+float64(now.Sub(b.at))/float64(t.every))
		b.at = now
	}
}

// allow reports whether key has a token at now, taking it if take is set,
// and otherwise how long until it has one.
func (t *throttle) allow(key string, now time.Time, take bool) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		if len(t.buckets) >= t.max {
			for k, other := range t.buckets {
				if t.refill(other, now); other.tokens >= t.burst {
					delete(t.buckets, k)
				}
			}
		}
		if len(t.buckets) < t.max {
			b = &bucket{tokens: t.burst, at: now}
			t.buckets[key] = b
		} else {
			b = &t.shared
		}
	}
	t.refill(b, now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(t.every))
	}
	if take {
		b.tokens--
	}
	return true, 0
}

// give returns a token that allow took from key's bucket at now (or from
// the shared one, for a key that found no room), up to the burst.
func (t *throttle) give(key string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		b = &t.shared
	}
	t.refill(b, now)
	b.tokens = min(t.burst, b.tokens+1)
}
