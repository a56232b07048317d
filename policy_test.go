package rdq

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/prop"
)

func TestPolicyDefaults(t *testing.T) {
	var p Policy
	if err := p.Validate(); err != nil {
		t.Fatalf("zero Policy is invalid: %v", err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w)
		}
	}
	// 2^12 s > 1h: capped at DefaultMaxBackoff.
	if got := p.Delay(13); got != DefaultMaxBackoff {
		t.Errorf("Delay(13) = %s, want %s", got, DefaultMaxBackoff)
	}
	if got := p.Delay(1000); got != DefaultMaxBackoff {
		t.Errorf("Delay(1000) = %s, want %s", got, DefaultMaxBackoff)
	}
	if p.Exhausted(DefaultMaxAttempts-1) || !p.Exhausted(DefaultMaxAttempts) {
		t.Errorf("zero Policy is not exhausted exactly at %d attempts", DefaultMaxAttempts)
	}
	// Default jitter: u close to 1 shortens the delay by nearly 20%.
	if got, min := p.JitteredDelay(1, 0.999999), time.Duration(float64(time.Second)*(1-DefaultJitter)); got < min || got > min+time.Millisecond {
		t.Errorf("JitteredDelay(1, ~1) = %s, want about %s", got, min)
	}
}

func TestPolicyDelaySchedule(t *testing.T) {
	p := Policy{InitialBackoff: 500 * time.Millisecond, Multiplier: 3, MaxBackoff: 20 * time.Second}
	want := []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 4500 * time.Millisecond, 13500 * time.Millisecond, 20 * time.Second, 20 * time.Second}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w)
		}
	}
	for _, n := range []int{0, -1, math.MinInt} {
		if got := p.Delay(n); got != p.Delay(1) {
			t.Errorf("Delay(%d) = %s, want Delay(1) = %s", n, got, p.Delay(1))
		}
	}
	if got := p.Delay(math.MaxInt); got != 20*time.Second {
		t.Errorf("Delay(MaxInt) = %s, want the cap", got)
	}
	// Multiplier 1 is a constant backoff.
	c := Policy{InitialBackoff: 7 * time.Second, Multiplier: 1}
	for n := 1; n < 50; n++ {
		if got := c.Delay(n); got != 7*time.Second {
			t.Fatalf("constant Delay(%d) = %s", n, got)
		}
	}
	// An InitialBackoff above MaxBackoff (here the default 1h) is
	// honoured: the first delay is always InitialBackoff.
	big := Policy{InitialBackoff: 2 * time.Hour}
	if got := big.Delay(1); got != 2*time.Hour {
		t.Errorf("Delay(1) with InitialBackoff 2h = %s", got)
	}
	if got := big.Delay(5); got != 2*time.Hour {
		t.Errorf("Delay(5) with InitialBackoff 2h = %s", got)
	}
}

// validPolicy draws a policy that Validate accepts, with explicit values.
func validPolicy(t *prop.T) Policy {
	p := Policy{
		MaxAttempts:    Unlimited,
		InitialBackoff: time.Duration(t.Int64Range(0, int64(2*time.Hour))),
		MaxBackoff:     time.Duration(t.Int64Range(0, int64(48*time.Hour))),
		Jitter:         prop.Pick(t, NoJitter, 0.0, t.Float64Range(0, 1)),
	}
	if t.Bool() {
		p.MaxAttempts = t.IntRange(0, 50)
	}
	if t.Bool() {
		p.Multiplier = t.Float64Range(1, 10)
	}
	return p
}

func effective(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func TestPolicyDelayProperties(t *testing.T) {
	prop.Check(t, func(t *prop.T) {
		p := validPolicy(t)
		if err := p.Validate(); err != nil {
			t.Fatalf("generated policy invalid: %v", err)
		}
		n := t.IntRange(1, 400)
		initial := effective(p.InitialBackoff, DefaultInitialBackoff)
		ceiling := max(effective(p.MaxBackoff, DefaultMaxBackoff), initial)
		d, next := p.Delay(n), p.Delay(n+1)
		if d > next {
			t.Fatalf("not monotone: Delay(%d) = %s > Delay(%d) = %s", n, d, n+1, next)
		}
		if d > ceiling {
			t.Fatalf("Delay(%d) = %s above the cap %s", n, d, ceiling)
		}
		if d < initial {
			t.Fatalf("Delay(%d) = %s below InitialBackoff %s", n, d, initial)
		}
		if p.Delay(1) != initial {
			t.Fatalf("Delay(1) = %s, want InitialBackoff %s", p.Delay(1), initial)
		}
		if d != p.Delay(n) {
			t.Fatal("Delay is not pure")
		}

		u := t.Float64Range(0, 1)
		if u == 1 {
			u = math.Nextafter(1, 0)
		}
		j := p.JitteredDelay(n, u)
		jitter := p.jitter()
		low := time.Duration(math.Floor(float64(d) * (1 - jitter)))
		if j > d || j < low {
			t.Fatalf("JitteredDelay(%d, %v) = %s outside [%s, %s] (jitter %v)", n, u, j, low, d, jitter)
		}
		if j != p.JitteredDelay(n, u) {
			t.Fatal("JitteredDelay is not pure")
		}
		if p.JitteredDelay(n, 0) != d {
			t.Fatalf("JitteredDelay(n, 0) = %s, want Delay(n) %s", p.JitteredDelay(n, 0), d)
		}
	})
}

func TestJitteredDelayEdges(t *testing.T) {
	p := Policy{InitialBackoff: 10 * time.Second, Jitter: 0.5}
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{
		{0, 10 * time.Second},
		{0.5, 7500 * time.Millisecond},
		{-3, 10 * time.Second},
		{math.NaN(), 10 * time.Second},
	} {
		if got := p.JitteredDelay(1, c.u); got != c.want {
			t.Errorf("JitteredDelay(1, %v) = %s, want %s", c.u, got, c.want)
		}
	}
	// u >= 1 is clamped just below 1: never below the jitter floor.
	for _, u := range []float64{1, 7, math.Inf(1)} {
		if got := p.JitteredDelay(1, u); got < 5*time.Second || got > 5*time.Second+time.Microsecond {
			t.Errorf("JitteredDelay(1, %v) = %s, want just above 5s", u, got)
		}
	}
	none := Policy{InitialBackoff: 10 * time.Second, Jitter: NoJitter}
	for _, u := range []float64{0, 0.3, 0.99} {
		if got := none.JitteredDelay(1, u); got != 10*time.Second {
			t.Errorf("NoJitter: JitteredDelay(1, %v) = %s", u, got)
		}
	}
	full := Policy{InitialBackoff: 10 * time.Second, Jitter: 1}
	if got := full.JitteredDelay(1, 0.75); got != 2500*time.Millisecond {
		t.Errorf("Jitter 1: JitteredDelay(1, 0.75) = %s, want 2.5s", got)
	}
}

func TestPolicyDecide(t *testing.T) {
	boom := errors.New("boom")
	classifyRateLimitRetryable := func(err error) Class {
		if strings.Contains(err.Error(), "rate limit") {
			return ClassRetryable
		}
		if strings.Contains(err.Error(), "invalid") {
			return ClassPermanent
		}
		return ClassDefault
	}
	base := Policy{MaxAttempts: 3, InitialBackoff: time.Second, Jitter: NoJitter}
	withClassifier := base
	withClassifier.Classify = classifyRateLimitRetryable
	unlimited := base
	unlimited.MaxAttempts = Unlimited

	cases := []struct {
		name string
		p    Policy
		n    int
		err  error
		want Decision
	}{
		{"success", base, 1, nil, Decision{Outcome: OutcomeSuccess}},
		{"success on the last attempt", base, 3, nil, Decision{Outcome: OutcomeSuccess}},
		{"retryable", base, 1, boom, Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Second}},
		{"retryable, second attempt backs off", base, 2, boom, Decision{Outcome: OutcomeRetryableFailure, RetryIn: 2 * time.Second}},
		{"exhausted", base, 3, boom, Decision{Outcome: OutcomeRetryableFailure, Dead: true}},
		{"beyond exhausted", base, 9, boom, Decision{Outcome: OutcomeRetryableFailure, Dead: true}},
		{"permanent", base, 1, Permanent(boom), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"wrapped permanent", base, 1, fmt.Errorf("x: %w", Permanent(boom)), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"retry after", base, 1, RetryAfter(time.Minute, boom), Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Minute}},
		{"retry after zero", base, 1, RetryAfter(0, boom), Decision{Outcome: OutcomeRetryableFailure, RetryIn: 0}},
		{"retry after when exhausted is dead", base, 3, RetryAfter(time.Minute, boom), Decision{Outcome: OutcomeRetryableFailure, Dead: true}},
		{"permanent beats retry after", base, 1, Permanent(RetryAfter(time.Minute, boom)), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"classifier permanent", withClassifier, 1, errors.New("invalid input"), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"classifier retryable overrides Permanent", withClassifier, 1, Permanent(errors.New("rate limit")), Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Second}},
		{"classifier retryable still exhausts", withClassifier, 3, errors.New("rate limit"), Decision{Outcome: OutcomeRetryableFailure, Dead: true}},
		{"classifier default keeps Permanent", withClassifier, 1, Permanent(boom), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"classifier default keeps retry", withClassifier, 1, boom, Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Second}},
		{"unlimited never exhausts", unlimited, 1_000_000, boom, Decision{Outcome: OutcomeRetryableFailure, RetryIn: DefaultMaxBackoff}},
		{"unlimited still dead on permanent", unlimited, 1, Permanent(boom), Decision{Outcome: OutcomePermanentFailure, Dead: true}},
		{"panic is retryable", base, 1, &PanicError{Value: "x"}, Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Second}},
		{"timeout is retryable", base, 1, &TimeoutError{After: time.Second}, Decision{Outcome: OutcomeRetryableFailure, RetryIn: time.Second}},
		{"max attempts 1: first failure is dead", Policy{MaxAttempts: 1}, 1, boom, Decision{Outcome: OutcomeRetryableFailure, Dead: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Decide(c.n, c.err, 0); got != c.want {
				t.Errorf("Decide(%d, %v) = %+v, want %+v", c.n, c.err, got, c.want)
			}
		})
	}
	t.Run("classifier not asked about success", func(t *testing.T) {
		p := Policy{Classify: func(error) Class { t.Fatal("Classify called for a nil error"); return ClassDefault }}
		if got := p.Decide(1, nil, 0); got.Outcome != OutcomeSuccess {
			t.Errorf("Decide = %+v", got)
		}
	})
}

func TestPolicyDecideLeaseExpired(t *testing.T) {
	p := Policy{MaxAttempts: 2, InitialBackoff: time.Second, Jitter: NoJitter}
	if got := p.DecideLeaseExpired(1, 0); got != (Decision{Outcome: OutcomeLeaseExpired, RetryIn: time.Second}) {
		t.Errorf("DecideLeaseExpired(1) = %+v", got)
	}
	if got := p.DecideLeaseExpired(2, 0); got != (Decision{Outcome: OutcomeLeaseExpired, Dead: true}) {
		t.Errorf("DecideLeaseExpired(2) = %+v", got)
	}
	p.MaxAttempts = Unlimited
	if got := p.DecideLeaseExpired(500, 0); got.Dead || got.Outcome != OutcomeLeaseExpired {
		t.Errorf("unlimited DecideLeaseExpired(500) = %+v", got)
	}
}

func TestPolicyDecideProperties(t *testing.T) {
	prop.Check(t, func(t *prop.T) {
		p := validPolicy(t)
		n := t.IntRange(1, 100)
		u := t.Float64Range(0, 0.999)
		permanent := t.Bool()
		var err error = errors.New("failure")
		retryAfter := time.Duration(-1)
		if t.Bool() {
			retryAfter = time.Duration(t.Int64Range(0, int64(time.Hour)))
			err = RetryAfter(retryAfter, err)
		}
		if permanent {
			err = Permanent(err)
		}
		d := p.Decide(n, err, u)
		exhausted := p.Exhausted(n)
		switch {
		case permanent:
			if d != (Decision{Outcome: OutcomePermanentFailure, Dead: true}) {
				t.Fatalf("permanent error: %+v", d)
			}
		case exhausted:
			if d != (Decision{Outcome: OutcomeRetryableFailure, Dead: true}) {
				t.Fatalf("exhausted: %+v", d)
			}
		case retryAfter >= 0:
			if d != (Decision{Outcome: OutcomeRetryableFailure, RetryIn: retryAfter}) {
				t.Fatalf("retry after %s: %+v", retryAfter, d)
			}
		default:
			if d != (Decision{Outcome: OutcomeRetryableFailure, RetryIn: p.JitteredDelay(n, u)}) {
				t.Fatalf("retry: %+v, want RetryIn %s", d, p.JitteredDelay(n, u))
			}
		}
		if p.MaxAttempts == Unlimited && exhausted {
			t.Fatal("an unlimited policy is exhausted")
		}
		if p.MaxAttempts > 0 && exhausted != (n >= p.MaxAttempts) {
			t.Fatalf("Exhausted(%d) = %v with MaxAttempts %d", n, exhausted, p.MaxAttempts)
		}
	})
}

func TestPolicyValidate(t *testing.T) {
	valid := []Policy{
		{},
		{MaxAttempts: Unlimited},
		{MaxAttempts: 1, InitialBackoff: time.Millisecond, Multiplier: 1, MaxBackoff: time.Second, Jitter: 1},
		{Jitter: NoJitter},
		{Multiplier: 1.5, Jitter: 0.3},
	}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
	invalid := []struct {
		p    Policy
		want string
	}{
		{Policy{MaxAttempts: -2}, "MaxAttempts -2"},
		{Policy{InitialBackoff: -time.Second}, "InitialBackoff -1s is negative"},
		{Policy{MaxBackoff: -time.Second}, "MaxBackoff -1s is negative"},
		{Policy{Multiplier: 0.5}, "Multiplier 0.5"},
		{Policy{Multiplier: -2}, "Multiplier -2"},
		{Policy{Multiplier: math.NaN()}, "Multiplier NaN"},
		{Policy{Multiplier: math.Inf(1)}, "Multiplier +Inf"},
		{Policy{Jitter: 1.5}, "Jitter 1.5"},
		{Policy{Jitter: -0.5}, "Jitter -0.5"},
		{Policy{Jitter: math.NaN()}, "Jitter NaN"},
	}
	for _, c := range invalid {
		err := c.p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid containing %q", c.p, err, c.want)
		}
	}
}

func TestPolicyExhausted(t *testing.T) {
	p := Policy{MaxAttempts: 5}
	for n := 0; n < 5; n++ {
		if p.Exhausted(n) {
			t.Errorf("Exhausted(%d) with MaxAttempts 5", n)
		}
	}
	if !p.Exhausted(5) || !p.Exhausted(6) {
		t.Error("not exhausted at or past MaxAttempts")
	}
	u := Policy{MaxAttempts: Unlimited}
	if u.Exhausted(math.MaxInt) {
		t.Error("Unlimited is exhausted")
	}
}

// A task's own budget and timeout replace the policy's within its bounds.
func TestPolicyForTask(t *testing.T) {
	p := Policy{MaxAttempts: 10, TaskMaxAttempts: 4, TaskMaxTimeout: time.Minute}
	for _, c := range []struct{ own, want int }{{0, 10}, {2, 2}, {4, 4}, {9, 4}, {Unlimited, 4}} {
		if got := p.ForTask(&Task{MaxAttempts: c.own}).MaxAttempts; got != c.want {
			t.Errorf("ForTask(MaxAttempts %d).MaxAttempts = %d, want %d", c.own, got, c.want)
		}
	}
	if got := (Policy{TaskMaxAttempts: Unlimited}).ForTask(&Task{MaxAttempts: Unlimited}).MaxAttempts; got != Unlimited {
		t.Errorf("an unlimited task on a queue allowing it: %d", got)
	}
	for _, c := range []struct{ own, queue, want time.Duration }{
		{0, 30 * time.Second, 30 * time.Second}, {5 * time.Second, 30 * time.Second, 5 * time.Second},
		{time.Hour, 30 * time.Second, time.Minute}, {5 * time.Second, 0, 5 * time.Second},
	} {
		if got := p.TaskTimeout(&Task{Timeout: c.own}, c.queue); got != c.want {
			t.Errorf("TaskTimeout(own %s, queue %s) = %s, want %s", c.own, c.queue, got, c.want)
		}
	}
	if err := p.CheckTask(4, time.Minute); err != nil {
		t.Errorf("CheckTask at the limits: %v", err)
	}
	for _, c := range []struct {
		n int
		d time.Duration
	}{{5, 0}, {-2, 0}, {Unlimited, 0}, {0, time.Minute + 1}, {0, -1}} {
		if err := p.CheckTask(c.n, c.d); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckTask(%d, %s) = %v, want ErrInvalid", c.n, c.d, err)
		}
	}
	for _, bad := range []Policy{{TaskMaxAttempts: -2}, {TaskMaxTimeout: -1}, {MaxSnoozes: -1}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
