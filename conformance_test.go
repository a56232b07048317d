package rdq

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The conformance vectors under testdata/conformance hold the Go core and
// every other implementation (the Java SDK reads the same files) to one
// contract: the backoff schedule and how failures are classified into
// decisions (testdata/fingerprints.json, checked by TestFingerprintGolden,
// does the same for fingerprints). The Go core writes them
// (go test -run TestConformanceVectors -update .) and checks them on every
// run, so a change to the rules shows up as a diff to review.

type vectorPolicy struct {
	MaxAttempts      int     `json:"max_attempts"`
	InitialBackoffNS int64   `json:"initial_backoff_ns"`
	Multiplier       float64 `json:"multiplier"`
	MaxBackoffNS     int64   `json:"max_backoff_ns"`
	Jitter           float64 `json:"jitter"`
}

func (v vectorPolicy) policy() Policy {
	return Policy{
		MaxAttempts:    v.MaxAttempts,
		InitialBackoff: time.Duration(v.InitialBackoffNS),
		Multiplier:     v.Multiplier,
		MaxBackoff:     time.Duration(v.MaxBackoffNS),
		Jitter:         v.Jitter,
	}
}

type backoffStep struct {
	Attempt    int     `json:"attempt"`
	U          float64 `json:"u"`
	DelayNS    int64   `json:"delay_ns"`
	JitteredNS int64   `json:"jittered_ns"`
	Exhausted  bool    `json:"exhausted"`
}

type backoffCase struct {
	Name   string        `json:"name"`
	Policy vectorPolicy  `json:"policy"`
	Steps  []backoffStep `json:"steps"`
}

type vectorError struct {
	// Kind is "none" (success), "plain", "typed" (an error naming its
	// type), "permanent", "permanent_typed", "retry_after",
	// "permanent_retry_after" or "lease_expired" (the attempt was lost).
	Kind         string `json:"kind"`
	Message      string `json:"message,omitempty"`
	Type         string `json:"type,omitempty"`
	RetryAfterNS int64  `json:"retry_after_ns,omitempty"`
}

type classificationExpect struct {
	Outcome   Outcome `json:"outcome"`
	Dead      bool    `json:"dead"`
	RetryInNS int64   `json:"retry_in_ns"`
	// ErrorType and Fingerprint are set for typed errors, whose type is
	// the same in every language.
	ErrorType   string `json:"error_type,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

type classificationCase struct {
	Name    string               `json:"name"`
	Policy  vectorPolicy         `json:"policy"`
	Attempt int                  `json:"attempt"`
	U       float64              `json:"u"`
	Error   vectorError          `json:"error"`
	Expect  classificationExpect `json:"expect"`
}

type vectorTypedError struct{ typ, msg string }

func (e *vectorTypedError) Error() string     { return e.msg }
func (e *vectorTypedError) ErrorType() string { return e.typ }

func (v vectorError) err() error {
	var base error
	switch v.Kind {
	case "none", "lease_expired":
		return nil
	case "typed", "permanent_typed":
		base = &vectorTypedError{typ: v.Type, msg: v.Message}
	default:
		base = errors.New(v.Message)
	}
	switch v.Kind {
	case "permanent", "permanent_typed":
		return Permanent(base)
	case "retry_after":
		return RetryAfter(time.Duration(v.RetryAfterNS), base)
	case "permanent_retry_after":
		return Permanent(RetryAfter(time.Duration(v.RetryAfterNS), base))
	}
	return base
}

func backoffVectors() []backoffCase {
	policies := []struct {
		name string
		p    vectorPolicy
		n    int
	}{
		{"defaults", vectorPolicy{}, 25},
		{"no jitter, 100ms doubling to 5s", vectorPolicy{MaxAttempts: 10, InitialBackoffNS: int64(100 * time.Millisecond), Multiplier: 2, MaxBackoffNS: int64(5 * time.Second), Jitter: NoJitter}, 10},
		{"multiplier 1.5, jitter 0.5", vectorPolicy{MaxAttempts: 8, InitialBackoffNS: int64(250 * time.Millisecond), Multiplier: 1.5, MaxBackoffNS: int64(time.Minute), Jitter: 0.5}, 8},
		{"multiplier 1, full jitter", vectorPolicy{MaxAttempts: 5, InitialBackoffNS: int64(3 * time.Second), Multiplier: 1, Jitter: 1}, 5},
		{"max below initial", vectorPolicy{MaxAttempts: 4, InitialBackoffNS: int64(10 * time.Second), Multiplier: 3, MaxBackoffNS: int64(time.Second), Jitter: 0.2}, 4},
		{"unlimited, huge multiplier overflows", vectorPolicy{MaxAttempts: Unlimited, InitialBackoffNS: int64(time.Millisecond), Multiplier: 1e300, MaxBackoffNS: int64(24 * time.Hour), Jitter: 0.1}, 6},
		{"odd values", vectorPolicy{MaxAttempts: 30, InitialBackoffNS: 1_234_567, Multiplier: 1.7, MaxBackoffNS: 987_654_321_000, Jitter: 0.33}, 30},
	}
	us := []float64{0, 0.5, 0.999999, 0.123456789, 0.75, 0.3333333333333333, 1}
	var out []backoffCase
	for _, pc := range policies {
		p := pc.p.policy()
		c := backoffCase{Name: pc.name, Policy: pc.p}
		for n := 0; n <= pc.n; n++ {
			u := us[n%len(us)]
			c.Steps = append(c.Steps, backoffStep{
				Attempt: n, U: u,
				DelayNS:    int64(p.Delay(n)),
				JitteredNS: int64(p.JitteredDelay(n, u)),
				Exhausted:  p.Exhausted(n),
			})
		}
		out = append(out, c)
	}
	return out
}

func classificationVectors() []classificationCase {
	three := vectorPolicy{MaxAttempts: 3, InitialBackoffNS: int64(time.Second), Multiplier: 2, MaxBackoffNS: int64(time.Minute), Jitter: 0.2}
	unlimited := vectorPolicy{MaxAttempts: Unlimited, InitialBackoffNS: int64(time.Second), Multiplier: 2, MaxBackoffNS: int64(time.Minute), Jitter: NoJitter}
	inputs := []struct {
		name    string
		p       vectorPolicy
		attempt int
		u       float64
		e       vectorError
	}{
		{"success", three, 1, 0.5, vectorError{Kind: "none"}},
		{"success on the last attempt", three, 3, 0.5, vectorError{Kind: "none"}},
		{"plain failure retries", three, 1, 0.5, vectorError{Kind: "plain", Message: "connection refused"}},
		{"plain failure, second attempt", three, 2, 0.25, vectorError{Kind: "plain", Message: "connection refused"}},
		{"plain failure exhausts attempts", three, 3, 0.5, vectorError{Kind: "plain", Message: "connection refused"}},
		{"plain failure past the limit", three, 7, 0.5, vectorError{Kind: "plain", Message: "connection refused"}},
		{"permanent dead at once", three, 1, 0.5, vectorError{Kind: "permanent", Message: "invalid card number"}},
		{"permanent on an unlimited policy", unlimited, 1, 0.5, vectorError{Kind: "permanent", Message: "invalid card number"}},
		{"typed timeout", three, 1, 0.9, vectorError{Kind: "typed", Type: "timeout", Message: "handler timed out after 30s"}},
		{"typed permanent", three, 2, 0.1, vectorError{Kind: "permanent_typed", Type: "validation", Message: "field email: must not be empty"}},
		{"typed with ids", three, 1, 0, vectorError{Kind: "typed", Type: "http_status", Message: "POST /v1/charges/ch_3f9a2b7c11 returned 503 after 1500ms (request 0190a5b2-7c3e-7b00-9abc-000000000001)"}},
		{"retry after overrides backoff", three, 1, 0.5, vectorError{Kind: "retry_after", Message: "rate limited", RetryAfterNS: int64(42 * time.Second)}},
		{"retry after zero", three, 2, 0.5, vectorError{Kind: "retry_after", Message: "rate limited", RetryAfterNS: 0}},
		{"retry after still exhausts", three, 3, 0.5, vectorError{Kind: "retry_after", Message: "rate limited", RetryAfterNS: int64(42 * time.Second)}},
		{"permanent wins over retry after", three, 1, 0.5, vectorError{Kind: "permanent_retry_after", Message: "gone", RetryAfterNS: int64(time.Second)}},
		{"unlimited never exhausts", unlimited, 1000, 0.5, vectorError{Kind: "plain", Message: "still down"}},
		{"lease expired retries", three, 1, 0.5, vectorError{Kind: "lease_expired"}},
		{"lease expired exhausts", three, 3, 0.5, vectorError{Kind: "lease_expired"}},
		{"lease expired beyond the limit (after a redrive the count restarts)", three, 4, 0.5, vectorError{Kind: "lease_expired"}},
		{"lease expired on unlimited", unlimited, 50, 0.5, vectorError{Kind: "lease_expired"}},
	}
	var out []classificationCase
	for _, in := range inputs {
		p := in.p.policy()
		var d Decision
		if in.e.Kind == "lease_expired" {
			d = p.DecideLeaseExpired(in.attempt, in.u)
		} else {
			d = p.Decide(in.attempt, in.e.err(), in.u)
		}
		exp := classificationExpect{Outcome: d.Outcome, Dead: d.Dead, RetryInNS: int64(d.RetryIn)}
		if in.e.Kind == "typed" || in.e.Kind == "permanent_typed" {
			f := Describe(in.e.err())
			exp.ErrorType, exp.Fingerprint = f.Type, f.Fingerprint
		}
		if in.e.Kind == "lease_expired" {
			f := LeaseExpiredFailure()
			exp.ErrorType, exp.Fingerprint = f.Type, f.Fingerprint
		}
		out = append(out, classificationCase{Name: in.name, Policy: in.p, Attempt: in.attempt, U: in.u, Error: in.e, Expect: exp})
	}
	return out
}

func encodeVector(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestConformanceVectors checks the shared vectors against the Go core, and
// rewrites them with -update.
func TestConformanceVectors(t *testing.T) {
	files := map[string]any{
		"backoff.json":        map[string]any{"cases": backoffVectors()},
		"classification.json": map[string]any{"cases": classificationVectors()},
	}
	for name, v := range files {
		path := filepath.Join("testdata", "conformance", name)
		want := encodeVector(t, v)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s (create it with go test -run TestConformanceVectors -update .): %v", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the Go core computes: a change to the cross-language contract; review it and rerun with -update", path)
		}
	}
}

// TestConformanceVectorsReadBack decodes the vector files and checks each
// case against the Go core independently of how they were generated, as
// the Java tests do.
func TestConformanceVectorsReadBack(t *testing.T) {
	var b struct{ Cases []backoffCase }
	readVector(t, "backoff.json", &b)
	if len(b.Cases) == 0 {
		t.Fatal("backoff.json has no cases")
	}
	for _, c := range b.Cases {
		p := c.Policy.policy()
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, s := range c.Steps {
			if got := int64(p.Delay(s.Attempt)); got != s.DelayNS {
				t.Errorf("%s: Delay(%d) = %d, vector says %d", c.Name, s.Attempt, got, s.DelayNS)
			}
			if got := int64(p.JitteredDelay(s.Attempt, s.U)); got != s.JitteredNS {
				t.Errorf("%s: JitteredDelay(%d, %v) = %d, vector says %d", c.Name, s.Attempt, s.U, got, s.JitteredNS)
			}
			if got := p.Exhausted(s.Attempt); got != s.Exhausted {
				t.Errorf("%s: Exhausted(%d) = %v, vector says %v", c.Name, s.Attempt, got, s.Exhausted)
			}
			if s.JitteredNS > s.DelayNS || float64(s.JitteredNS) < math.Floor(float64(s.DelayNS)*(1-p.jitter()))-1 {
				t.Errorf("%s: attempt %d: jittered %d outside [delay×(1-jitter), delay] of %d", c.Name, s.Attempt, s.JitteredNS, s.DelayNS)
			}
		}
	}
	var cl struct{ Cases []classificationCase }
	readVector(t, "classification.json", &cl)
	for _, c := range cl.Cases {
		p := c.Policy.policy()
		var d Decision
		if c.Error.Kind == "lease_expired" {
			d = p.DecideLeaseExpired(c.Attempt, c.U)
		} else {
			d = p.Decide(c.Attempt, c.Error.err(), c.U)
		}
		if d.Outcome != c.Expect.Outcome || d.Dead != c.Expect.Dead || int64(d.RetryIn) != c.Expect.RetryInNS {
			t.Errorf("%s: decision %+v, vector says %+v", c.Name, d, c.Expect)
		}
	}
}

func readVector(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "conformance", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
