package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/srjn45/rdq"
)

// Role is what a principal may do in the queues a grant covers. Roles
// include each other: an operator may do everything a submitter may, an
// admin everything an operator may.
type Role int

// The roles, from least to most powerful.
const (
	// RoleNone grants nothing.
	RoleNone Role = iota
	// RoleSubmitter may submit tasks and read them (Submit, SubmitBatch,
	// GetTask).
	RoleSubmitter
	// RoleOperator may also operate the dead-letter queue (list, groups,
	// show, redrive, purge) and read the audit log and queue statistics.
	RoleOperator
	// RoleAdmin may also pause and resume queues.
	RoleAdmin
)

// String returns the role's name: "submitter", "operator", "admin" or
// "none".
func (r Role) String() string {
	switch r {
	case RoleSubmitter:
		return "submitter"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses a role name as written by Role.String. It returns an
// error wrapping rdq.ErrInvalid for anything else, "none" included.
func ParseRole(s string) (Role, error) {
	switch s {
	case "submitter":
		return RoleSubmitter, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("%w: role %q: use submitter, operator or admin", rdq.ErrInvalid, s)
}

// Grant gives a role in the queues matching a pattern.
type Grant struct {
	// Queue is a queue name pattern: a queue name ("orders"), a prefix
	// followed by "*" ("orders.*" matches "orders.eu" and "orders."), or
	// "*" alone for every queue. Operations that are not about one queue
	// (a DLQ listing without a queue filter, the audit log) need a "*"
	// grant.
	Queue string
	// Role is what the grant allows.
	Role Role
}

// Validate checks the pattern and role.
func (g Grant) Validate() error {
	if g.Role < RoleSubmitter || g.Role > RoleAdmin {
		return fmt.Errorf("%w: grant for %q has no role", rdq.ErrInvalid, g.Queue)
	}
	if g.Queue == "*" {
		return nil
	}
	name, prefix := strings.CutSuffix(g.Queue, "*")
	if prefix && name == "" {
		return nil
	}
	if err := rdq.ValidateName("queue pattern", name); err != nil {
		return err
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf("%w: queue pattern %q: '*' may only end a pattern", rdq.ErrInvalid, g.Queue)
	}
	return nil
}

func (g Grant) matches(queue string) bool {
	if g.Queue == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(g.Queue, "*"); ok {
		return strings.HasPrefix(queue, prefix)
	}
	return g.Queue == queue
}

// Principal is an authenticated caller. Its Name is the actor written to
// the audit log for its DLQ mutations and the worker ID of first failures
// it submits (as "api:" + Name).
type Principal struct {
	// Name identifies the caller; 1 to 128 bytes without control
	// characters.
	Name string
	// Grants are the caller's roles per queue pattern.
	Grants []Grant
}

// Validate checks the name and every grant.
func (p *Principal) Validate() error {
	if p.Name == "" || len(p.Name) > 128 {
		return fmt.Errorf("%w: principal name must be 1 to 128 bytes", rdq.ErrInvalid)
	}
	for _, c := range p.Name {
		if c < ' ' || c == 0x7f {
			return fmt.Errorf("%w: principal name %q contains a control character", rdq.ErrInvalid, p.Name)
		}
	}
	for _, g := range p.Grants {
		if err := g.Validate(); err != nil {
			return fmt.Errorf("principal %s: %w", p.Name, err)
		}
	}
	return nil
}

// Can reports whether p holds role (or a greater one) in queue.
func (p *Principal) Can(role Role, queue string) bool {
	for _, g := range p.Grants {
		if g.Role >= role && g.matches(queue) {
			return true
		}
	}
	return false
}

// CanAll reports whether p holds role (or a greater one) in every queue,
// through a "*" grant.
func (p *Principal) CanAll(role Role) bool {
	for _, g := range p.Grants {
		if g.Role >= role && g.Queue == "*" {
			return true
		}
	}
	return false
}

// ErrUnauthenticated is returned by an Authenticator for a missing, unknown
// or revoked token.
var ErrUnauthenticated = errors.New("server: unauthenticated")

// Authenticator maps a bearer token to a principal.
type Authenticator interface {
	// Authenticate returns the principal token belongs to, or an error
	// wrapping ErrUnauthenticated. Other errors are reported as internal.
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// MinTokenLength is the shortest bearer token Tokens accepts, in bytes.
const MinTokenLength = 32

// StrongTokenHint says what a strong token is, for error messages.
const StrongTokenHint = "use at least 32 random characters, such as the output of `openssl rand -base64 32`"

// ValidateToken reports whether tok is strong enough to be a configured
// secret (a bearer token, a metrics token): at least MinTokenLength bytes
// that look random, not a repetition, run or sequence (of any stride) of a
// few characters. It cannot tell every guessable token (words, keyboard
// walks): generate tokens, never make them up.
// Its error wraps rdq.ErrInvalid, says what is wrong and what a strong
// token is, and never holds the token.
func ValidateToken(tok string) error {
	n := len(tok)
	if n < MinTokenLength {
		return fmt.Errorf("%w: the token is %d bytes: %s", rdq.ErrInvalid, n, StrongTokenHint)
	}
	var counts [256]int
	for i := 0; i < n; i++ {
		counts[tok[i]]++
	}
	entropy := 0.0 // Shannon entropy of the token's bytes, bits per byte
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(n)
			entropy -= p * math.Log2(p)
		}
	}
	if entropy < 2.75 {
		return fmt.Errorf("%w: the token repeats a few characters (%.1f bits of entropy per character): %s", rdq.ErrInvalid, entropy, StrongTokenHint)
	}
	// steps counts neighbours equal or one apart, as in "aaaa" or "abcd",
	// or as far apart as the two before them, as in "acegik" or "adgj".
	steps := 0
	for i := 1; i < n; i++ {
		d := int(tok[i]) - int(tok[i-1])
		if (d >= -1 && d <= 1) || (i >= 2 && d == int(tok[i-1])-int(tok[i-2])) {
			steps++
		}
	}
	if float64(steps) > 0.6*float64(n-1) {
		return fmt.Errorf("%w: the token is mostly runs or sequences of characters: %s", rdq.ErrInvalid, StrongTokenHint)
	}
	for period := 1; period <= n/2; period++ {
		same := 0
		for i := period; i < n; i++ {
			if tok[i] == tok[i-period] {
				same++
			}
		}
		if float64(same) > 0.75*float64(n-period) {
			return fmt.Errorf("%w: the token repeats a pattern of %d characters: %s", rdq.ErrInvalid, period, StrongTokenHint)
		}
	}
	return nil
}

// Tokens is a static Authenticator: a fixed set of bearer tokens. Tokens
// are kept and looked up by their SHA-256, so lookups take the same time
// whatever the token's prefix.
type Tokens struct {
	byHash map[[sha256.Size]byte]*Principal
}

// NewTokens returns an Authenticator for tokens, mapping each token to its
// principal. Every token must pass ValidateToken, and every principal be
// valid; two tokens may share a principal.
func NewTokens(tokens map[string]*Principal) (*Tokens, error) {
	t := &Tokens{byHash: make(map[[sha256.Size]byte]*Principal, len(tokens))}
	for tok, p := range tokens {
		if p == nil {
			return nil, fmt.Errorf("%w: a token has no principal", rdq.ErrInvalid)
		}
		if err := ValidateToken(tok); err != nil {
			return nil, fmt.Errorf("the token of %s: %w", p.Name, err)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		t.byHash[sha256.Sum256([]byte(tok))] = p
	}
	return t, nil
}

// Authenticate implements Authenticator.
func (t *Tokens) Authenticate(_ context.Context, token string) (*Principal, error) {
	if p, ok := t.byHash[sha256.Sum256([]byte(token))]; ok && token != "" {
		return p, nil
	}
	return nil, fmt.Errorf("%w: unknown bearer token", ErrUnauthenticated)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, as the transports do after
// authenticating a request. Service methods called directly (not through
// Handler or the gRPC server) need it.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// value.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
