package rdq

import (
	"errors"
	"fmt"
	"testing"
)

// typedLeaf has an ErrorType method.
type typedLeaf struct{ name string }

func (e *typedLeaf) Error() string     { return e.name }
func (e *typedLeaf) ErrorType() string { return e.name }

// asSetter wraps an error and, through its As method, answers for a
// *typedLeaf it holds aside (and for nothing else).
type asSetter struct {
	err   error
	aside *typedLeaf
}

func (e *asSetter) Error() string { return "as-setter" }
func (e *asSetter) Unwrap() error { return e.err }
func (e *asSetter) As(target any) bool {
	switch t := target.(type) {
	case **typedLeaf:
		*t = e.aside
		return true
	case *interface{ ErrorType() string }:
		*t = e.aside
		return true
	}
	return false
}

// nilUnwrap unwraps to nil.
type nilUnwrap struct{}

func (nilUnwrap) Error() string { return "nil-unwrap" }
func (nilUnwrap) Unwrap() error { return nil }

// errorTrees returns every error tree up to depth levels of wrapping built
// from rdq's wrappers, fmt's, errors.Join, an As method and leaves with and
// without an ErrorType method.
func errorTrees(depth int) []error {
	leaves := []error{
		errors.New("plain"),
		&typedLeaf{name: "leaf"},
		&PanicError{Value: "boom", Stack: []byte("stack")},
		&MethodPanicError{Type: "method_panicked"},
		&SnoozeError{After: 1},
		nilUnwrap{},
	}
	if depth == 0 {
		return leaves
	}
	inner := errorTrees(depth - 1)
	out := append([]error(nil), leaves...)
	for i, e := range inner {
		out = append(out,
			fmt.Errorf("wrapped: %w", e),
			Permanent(e),
			RetryAfter(2, e),
			&asSetter{err: e, aside: &typedLeaf{name: fmt.Sprint("aside", i)}},
			errors.Join(e, inner[(i+1)%len(inner)]),
			fmt.Errorf("%w and %w", inner[(i+2)%len(inner)], e),
			errors.Join(nil, e),
		)
	}
	return out
}

// sameAs checks as[T] against errors.As on err.
func sameAs[T comparable](t *testing.T, err error) {
	t.Helper()
	var want T
	wantOK := errors.As(err, &want)
	got, gotOK := as[T](err)
	if got != want || gotOK != wantOK {
		t.Fatalf("as[%T](%q) = %v, %v; errors.As gives %v, %v", want, err, got, gotOK, want, wantOK)
	}
}

func TestAsFindsWhatErrorsAsFinds(t *testing.T) {
	trees := errorTrees(3)
	if len(trees) < 2000 {
		t.Fatalf("only %d trees", len(trees))
	}
	for _, err := range trees {
		sameAs[interface{ ErrorType() string }](t, err)
		sameAs[*typedLeaf](t, err)
		sameAs[*PanicError](t, err)
		sameAs[*MethodPanicError](t, err)
		sameAs[*SnoozeError](t, err)
		sameAs[*permanentError](t, err)
		sameAs[*retryAfterError](t, err)
	}
	if _, ok := as[*PanicError](nil); ok {
		t.Fatal("as found an error in nil")
	}
}

// BenchmarkClassify measures what a worker asks of each failed attempt's
// error: its type, whether it is permanent, a retry delay and a snooze.
func BenchmarkClassify(b *testing.B) {
	err := fmt.Errorf("charging card: %w", errors.New("downstream unavailable: connection refused"))
	b.ReportAllocs()
	for b.Loop() {
		_ = ErrorTypeOf(err)
		_ = IsPermanent(err)
		_, _ = RetryAfterOf(err)
		_, _ = SnoozeOf(err)
	}
}
