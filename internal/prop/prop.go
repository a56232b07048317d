// Package prop runs property tests with the standard library: a property
// is checked on Cases inputs drawn from a seeded generator, and a failure
// names the seed that draws the failing input again.
//
// The core module's tests use it instead of a property-testing library so
// that the module's go.mod names no test-only dependency; the other modules
// use pgregory.net/rapid, which also shrinks failing inputs.
package prop

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Cases is how many inputs Check draws.
const Cases = 100

// EnvSeed names the environment variable that makes Check draw one input,
// from the given seed: the way to rerun a failing case.
const EnvSeed = "RDQ_PROP_SEED"

// T is one case of a property: the test, and the generator of its input.
type T struct {
	testing.TB
	r *rand.Rand
}

// Check calls property with Cases inputs, each from a generator of its own
// seed, and stops at the first that fails, logging its seed.
func Check(t *testing.T, property func(*T)) {
	t.Helper()
	first, n := uint64(time.Now().UnixNano()), Cases
	if v := os.Getenv(EnvSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("prop: %s=%q is not a seed (an unsigned integer): %v", EnvSeed, v, err)
		}
		first, n = s, 1
	}
	var seed uint64
	defer func() {
		if t.Failed() {
			t.Logf("prop: the failing case has seed %d; rerun it alone with %s=%d", seed, EnvSeed, seed)
		}
	}()
	for i := range n {
		seed = first + uint64(i)
		property(&T{TB: t, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))})
		if t.Failed() {
			return
		}
	}
}

// IntRange draws an int in [lo, hi].
func (t *T) IntRange(lo, hi int) int { return lo + t.r.IntN(hi-lo+1) }

// Int64Range draws an int64 in [lo, hi].
func (t *T) Int64Range(lo, hi int64) int64 { return lo + t.r.Int64N(hi-lo+1) }

// Float64Range draws a float64 in [lo, hi], each end now and then, where
// rounding mistakes live.
func (t *T) Float64Range(lo, hi float64) float64 {
	switch t.r.IntN(16) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + t.r.Float64()*(hi-lo)
}

// Bool draws true or false.
func (t *T) Bool() bool { return t.r.IntN(2) == 0 }

// Bytes draws n bytes.
func (t *T) Bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(t.r.UintN(256))
	}
	return b
}

// StringOf draws a string of min to max characters of alphabet.
func (t *T) StringOf(alphabet string, min, max int) string {
	runes := []rune(alphabet)
	n := t.IntRange(min, max)
	out := make([]rune, n)
	for i := range out {
		out[i] = runes[t.r.IntN(len(runes))]
	}
	return string(out)
}

// String draws a string of up to max runes from every plane: ASCII most
// often, then Latin-1, other BMP runes and runes beyond it.
func (t *T) String(max int) string {
	n := t.IntRange(0, max)
	out := make([]rune, n)
	for i := range out {
		switch t.r.IntN(8) {
		case 0, 1, 2, 3:
			out[i] = rune(t.r.IntN(0x80))
		case 4:
			out[i] = rune(0x80 + t.r.IntN(0x780))
		case 5, 6:
			r := rune(0x800 + t.r.IntN(0xF800))
			if r >= 0xD800 && r < 0xE000 { // surrogates are not runes
				r = 'x'
			}
			out[i] = r
		default:
			out[i] = rune(0x10000 + t.r.IntN(0x100000))
		}
	}
	return string(out)
}

// Pick draws one of xs.
func Pick[E any](t *T, xs ...E) E { return xs[t.r.IntN(len(xs))] }
