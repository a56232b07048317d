package server

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

func TestGrantPatterns(t *testing.T) {
	p := &Principal{Name: "p", Grants: []Grant{
		{Queue: "orders", Role: RoleOperator},
		{Queue: "mail.*", Role: RoleSubmitter},
	}}
	cases := []struct {
		role  Role
		queue string
		want  bool
	}{
		{RoleSubmitter, "orders", true},
		{RoleOperator, "orders", true},
		{RoleAdmin, "orders", false},
		{RoleSubmitter, "orders2", false},
		{RoleSubmitter, "mail.eu", true},
		{RoleSubmitter, "mail.", true},
		{RoleSubmitter, "mail", false},
		{RoleOperator, "mail.eu", false},
	}
	for _, c := range cases {
		if got := p.Can(c.role, c.queue); got != c.want {
			t.Errorf("Can(%s, %q) = %v", c.role, c.queue, got)
		}
	}
	if p.CanAll(RoleSubmitter) {
		t.Error("CanAll without a * grant")
	}
	all := &Principal{Name: "a", Grants: []Grant{{Queue: "*", Role: RoleOperator}}}
	if !all.CanAll(RoleSubmitter) || !all.CanAll(RoleOperator) || all.CanAll(RoleAdmin) || !all.Can(RoleOperator, "anything") {
		t.Error("* grant")
	}
}

func TestGrantValidate(t *testing.T) {
	for _, g := range []Grant{{"*", RoleAdmin}, {"orders", RoleSubmitter}, {"orders.*", RoleOperator}} {
		if err := g.Validate(); err != nil {
			t.Errorf("%+v: %v", g, err)
		}
	}
	for _, g := range []Grant{{"", RoleAdmin}, {"orders", RoleNone}, {"or*ders", RoleAdmin}, {"**", RoleAdmin}, {"bad name", RoleAdmin}} {
		if err := g.Validate(); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("%+v: err = %v, want rdq.ErrInvalid", g, err)
		}
	}
	if _, err := ParseRole("root"); !errors.Is(err, rdq.ErrInvalid) {
		t.Error("ParseRole accepted an unknown role")
	}
	for _, r := range []Role{RoleSubmitter, RoleOperator, RoleAdmin} {
		if got, err := ParseRole(r.String()); err != nil || got != r {
			t.Errorf("ParseRole(%s) = %v, %v", r, got, err)
		}
	}
}

func TestTokens(t *testing.T) {
	p := &Principal{Name: "svc", Grants: []Grant{{Queue: "*", Role: RoleSubmitter}}}
	if _, err := NewTokens(map[string]*Principal{"short": p}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("short token: %v", err)
	}
	if _, err := NewTokens(map[string]*Principal{strongToken: {Name: ""}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("unnamed principal: %v", err)
	}
	tok, err := NewTokens(map[string]*Principal{strongToken: p})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tok.Authenticate(context.Background(), strongToken); err != nil || got != p {
		t.Errorf("valid token: %v %v", got, err)
	}
	for _, bad := range []string{"", strongToken[:len(strongToken)-1], strongToken + " "} {
		if _, err := tok.Authenticate(context.Background(), bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

// strongToken is a token NewTokens accepts (openssl rand -base64 32).
const strongToken = "pV3q8Zr1nK0xYb7sLw2Tj5Hc9Gd4Fm6AeQuRoIiCtM="

// Weak configured tokens are refused, saying what a strong token is; the
// tokens the usual generators print are accepted.
func TestTokensRefuseWeakTokens(t *testing.T) {
	p := &Principal{Name: "svc", Grants: []Grant{{Queue: "*", Role: RoleSubmitter}}}
	weak := []string{
		"aaaaaaaaaaaaaaaa", // the 16-character token of the review
		strings.Repeat("a", 64),
		"abcdefghijklmnopqrstuvwxyzabcdef",
		"0123456789abcdef0123456789abcdef",
		"abababababababababababababababab",
		"aabbccddeeffgghhiijjkkllmmnnoopp",
		strings.Repeat("k3P9xQ2m", 5),
		"dev-token-too-short",
		"acegikmoqsuwy02468acegikmoqsuwy02",   // a sequence of stride 2
		"adgjmpsvybehknqtwzcfilorux147036925", // of stride 3
	}
	for _, tok := range weak {
		_, err := NewTokens(map[string]*Principal{tok: p})
		if !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("weak token %q accepted: %v", tok, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "svc") || !strings.Contains(msg, "openssl rand") || !strings.Contains(msg, "32") || strings.Contains(msg, tok) {
			t.Errorf("weak token %q: message %q should name the principal and what a strong token is, without the token", tok, msg)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 32)
	for i := range 20000 {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		for _, tok := range []string{hex.EncodeToString(raw[:16]), hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw[:24])} {
			if err := ValidateToken(tok); err != nil {
				t.Fatalf("random token %d %q refused: %v", i, tok, err)
			}
		}
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "": "", "Bearer ": ""} {
		got, ok := bearerToken(in)
		if got != want || ok != (want != "") {
			t.Errorf("bearerToken(%q) = %q, %v", in, got, ok)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		code Code
		http int
		grpc codes.Code
	}{
		{fmt.Errorf("x: %w", rdq.ErrInvalid), CodeInvalidArgument, 400, codes.InvalidArgument},
		{fmt.Errorf("task: %w", store.ErrNotFound), CodeNotFound, 404, codes.NotFound},
		{store.ErrNotDead, CodeNotDead, 409, codes.FailedPrecondition},
		{store.ErrRedriveLimit, CodeRedriveLimit, 409, codes.FailedPrecondition},
		{context.DeadlineExceeded, CodeDeadlineExceeded, 504, codes.DeadlineExceeded},
		{errors.New("boom: password=hunter2"), CodeInternal, 500, codes.Internal},
		{errorf(CodePayloadTooLarge, "big"), CodePayloadTooLarge, http.StatusRequestEntityTooLarge, codes.ResourceExhausted},
	}
	for _, c := range cases {
		e := classify(c.err)
		if e.Code != c.code || e.Code.HTTPStatus() != c.http || e.Code.GRPCCode() != c.grpc {
			t.Errorf("%v: %s %d %s", c.err, e.Code, e.Code.HTTPStatus(), e.Code.GRPCCode())
		}
		st, _ := status.FromError(e)
		if st.Code() != c.grpc || CodeOf(st.Err()) != c.code {
			t.Errorf("%v: gRPC status %v, CodeOf %s", c.err, st, CodeOf(st.Err()))
		}
	}
	if e := classify(errors.New("boom: password=hunter2")); e.Message != "internal error; the server log has the details" {
		t.Errorf("internal error leaks its text: %q", e.Message)
	}
	if got := cleanMessage(fmt.Errorf("client: submit: %w", fmt.Errorf("%w: queue name is empty", rdq.ErrInvalid))); got != "queue name is empty" {
		t.Errorf("cleanMessage = %q", got)
	}
}

// A gRPC status without rdq's ErrorInfo maps to one code, every time, even
// where several codes share its gRPC code.
func TestCodeOfIsDeterministic(t *testing.T) {
	cases := map[codes.Code]Code{
		codes.Unimplemented:      CodeUnimplemented,
		codes.FailedPrecondition: CodeNotDead,
		codes.InvalidArgument:    CodeInvalidArgument,
		codes.ResourceExhausted:  CodePayloadTooLarge,
	}
	for c, want := range cases {
		for i := 0; i < 200; i++ {
			if got := CodeOf(status.Error(c, "no details")); got != want {
				t.Fatalf("CodeOf(%s) = %s on try %d, want %s", c, got, i, want)
			}
		}
	}
	if got := CodeOf(status.Error(codes.Unknown, "x")); got != CodeInternal {
		t.Errorf("CodeOf(Unknown) = %s", got)
	}
}

// Store names never reach an API caller.
func TestCleanMessageDropsStoreNames(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("pgstore: redrive dead: %w: limit 0", rdq.ErrInvalid),
		fmt.Errorf("sqlitestore: get task x: %w", store.ErrNotFound),
	} {
		msg := classify(err).Message
		if strings.Contains(msg, "store") {
			t.Errorf("%v: message %q names the store", err, msg)
		}
	}
}
