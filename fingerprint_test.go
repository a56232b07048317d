package rdq

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/srjn45/rdq/internal/prop"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (fingerprints, conformance vectors)")

// fingerprintGolden is testdata/fingerprints.json: the golden table every
// implementation of the default fingerprint (NormalizeMessage, Fingerprint)
// must reproduce.
type fingerprintGolden struct {
	About []string          `json:"about"`
	Cases []fingerprintCase `json:"cases"`
}

// fingerprintCase is one row: a failure, its normalised message and its
// fingerprint. Cases with the same Group must share a fingerprint; cases of
// different groups must not. Group is written by hand and never rewritten
// by -update, so it checks the intent while the other two columns pin the
// exact output.
type fingerprintCase struct {
	Group       string `json:"group"`
	ErrorType   string `json:"error_type"`
	Message     string `json:"message"`
	Normalized  string `json:"normalized"`
	Fingerprint string `json:"fingerprint"`
}

var fingerprintAbout = []string{
	"Golden table of rdq's default failure fingerprint (rdq.NormalizeMessage and rdq.Fingerprint in outcome.go, whose doc comments state the algorithm step by step).",
	"Every implementation must turn each message into the normalized form shown, and error_type plus message into the fingerprint shown.",
	"Cases with the same group share a fingerprint; cases of different groups do not.",
	"Regenerate the normalized and fingerprint columns with: go test -run TestFingerprintGolden -update",
}

func TestFingerprintGolden(t *testing.T) {
	path := filepath.Join("testdata", "fingerprints.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g fingerprintGolden
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(g.Cases) < 50 {
		t.Fatalf("%s has %d cases; the table is the contract for other implementations and must stay broad", path, len(g.Cases))
	}
	if *update {
		g.About = fingerprintAbout
		for i := range g.Cases {
			c := &g.Cases[i]
			c.Normalized = NormalizeMessage(c.Message)
			c.Fingerprint = Fingerprint(c.ErrorType, c.Message)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(g); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	byGroup := map[string]string{} // group → fingerprint
	groupOf := map[string]string{} // fingerprint → group
	for _, c := range g.Cases {
		if c.Group == "" {
			t.Errorf("case %q has no group", c.Message)
		}
		if got := NormalizeMessage(c.Message); got != c.Normalized {
			t.Errorf("NormalizeMessage(%q) = %q, golden %q", c.Message, got, c.Normalized)
		}
		fp := Fingerprint(c.ErrorType, c.Message)
		if fp != c.Fingerprint {
			t.Errorf("Fingerprint(%q, %q) = %s, golden %s", c.ErrorType, c.Message, fp, c.Fingerprint)
		}
		if prev, ok := byGroup[c.Group]; ok && prev != fp {
			t.Errorf("group %s: %q has fingerprint %s, others in the group %s", c.Group, c.Message, fp, prev)
		}
		byGroup[c.Group] = fp
		if other, ok := groupOf[fp]; ok && other != c.Group {
			t.Errorf("groups %s and %s share fingerprint %s (%q)", other, c.Group, fp, c.Message)
		}
		groupOf[fp] = c.Group
	}
}

// TestNormalizeMessageTokens pins single rules of the algorithm, each
// against a neighbour that must come out differently.
func TestNormalizeMessageTokens(t *testing.T) {
	cases := []struct{ in, want string }{
		{"status 404", "status 404"},
		{"status 600", "status <n>"},
		{"status 99", "status <n>"},
		{"Status: 503", "status: 503"},
		{"http/1.0 404", "http 404"},
		{"responded 404", "responded <n>"},
		{"404 status", "<n> status"},
		{"deadbeef", "<hex>"},
		{"deadbee", "deadbee"},
		{"0x1", "<hex>"},
		{"cafe1", "<id>"},
		{"12345678", "<n>"},
		{"a@b", "<email>"},
		{"@", "@"},
		{"ab-12", "<id>"},
		{"ab-cd", "ab-cd"},
		{"a--1", "a--<n>"},
		{"x.", "x."},
		{"1.2.3.", "<n>."},
		{"0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b-x", "<id>"},
		{"ÀB 12", "Àb <n>"},
		{"a\u00a0b", "a\u00a0b"},
		{"\v\f x \r\n", "x"},
		{"", ""},
	}
	for _, c := range cases {
		if got := NormalizeMessage(c.in); got != c.want {
			t.Errorf("NormalizeMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

type fpError struct{ msg string }

func (e fpError) Error() string     { return e.msg }
func (e fpError) ErrorType() string { return "fp" }

func TestPolicyFingerprint(t *testing.T) {
	byTenant := Policy{Fingerprint: func(errorType, message string) string {
		if tenant, _, ok := strings.Cut(message, ":"); ok {
			return errorType + "/" + tenant
		}
		return ""
	}}
	a := byTenant.Describe(fpError{"acme: order 1 failed"})
	b := byTenant.Describe(fpError{"acme: quota exceeded"})
	c := byTenant.Describe(fpError{"globex: order 1 failed"})
	if a.Fingerprint != b.Fingerprint || a.Fingerprint == c.Fingerprint {
		t.Errorf("custom fingerprints do not group by tenant: %s %s %s", a.Fingerprint, b.Fingerprint, c.Fingerprint)
	}
	if a.Fingerprint != hashFingerprint("fp/acme") || len(a.Fingerprint) != 16 {
		t.Errorf("custom fingerprint %q is not the hash of the returned text", a.Fingerprint)
	}
	if a.Type != "fp" || a.Message != "acme: order 1 failed" {
		t.Errorf("custom policy changed type or message: %+v", a)
	}

	// An empty result falls back to the default.
	d := byTenant.Describe(fpError{"no tenant 42"})
	if d.Fingerprint != Fingerprint("fp", "no tenant 42") {
		t.Errorf("empty custom result: fingerprint %s, want the default", d.Fingerprint)
	}
	// So does a panic, which must not escape.
	panicky := Policy{Fingerprint: func(string, string) string { panic("bug in fingerprint") }}
	if got := panicky.Describe(errors.New("boom 7")); got.Fingerprint != Fingerprint("*errors.errorString", "boom 7") {
		t.Errorf("panicking fingerprint function: %+v", got)
	}
	// The documented equivalent of the default reproduces it.
	same := Policy{Fingerprint: func(errorType, message string) string {
		return errorType + "\x00" + NormalizeMessage(message)
	}}
	for _, msg := range []string{"order 1042 failed: status 503", "", "x"} {
		if got, want := same.Describe(errors.New(msg)).Fingerprint, Describe(errors.New(msg)).Fingerprint; got != want {
			t.Errorf("documented default equivalent: %s, want %s", got, want)
		}
	}
	// The function sees the capped message.
	var seen string
	capture := Policy{Fingerprint: func(_, m string) string { seen = m; return m }}
	capture.Describe(errors.New(strings.Repeat("y", 2*MaxMessageBytes)))
	if len(seen) > MaxMessageBytes {
		t.Errorf("fingerprint function saw %d bytes; the cap is %d", len(seen), MaxMessageBytes)
	}
	if (Policy{}).Describe(nil) != (Failure{}) || byTenant.Describe(nil) != (Failure{}) {
		t.Error("Describe(nil) is not the zero Failure")
	}
}

func FuzzNormalizeMessage(f *testing.F) {
	for _, s := range []string{"status 404", "HTTP/1.1 503 x", "a@b.c 0xff deadbeef", "ab-12 1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeMessage(s)
		if NormalizeMessage(n) != n {
			t.Errorf("not idempotent: %q → %q → %q", s, n, NormalizeMessage(n))
		}
		if strings.HasPrefix(n, " ") || strings.HasSuffix(n, " ") || strings.Contains(n, "  ") {
			t.Errorf("white space not collapsed: %q", n)
		}
	})
}

// TestFingerprintCache checks that the cache of recent fingerprints never
// changes a result: fingerprints drawn from a small pool of failures (so
// that entries are hit, and replaced when two share a slot), from several
// goroutines at once, are always the documented hash of the type and the
// normalized message; messages too long to be cached too.
func TestFingerprintCache(t *testing.T) {
	want := func(errorType, message string) string {
		sum := sha256.Sum256([]byte(errorType + "\x00" + NormalizeMessage(message)))
		return hex.EncodeToString(sum[:8])
	}
	prop.Check(t, func(rt *prop.T) {
		type failure struct{ errorType, message string }
		pool := make([]failure, rt.IntRange(1, rt.IntRange(1, 600)))
		for i := range pool {
			pool[i].errorType = prop.Pick(rt, "timeout", "*net.OpError", "http_503", "")
			switch rt.IntRange(0, 2) {
			case 0:
				pool[i].message = rt.String(40)
			case 1:
				pool[i].message = rt.StringOf("abcdefghijklmnopqrstuvwxyz ", 0, 20) + rt.StringOf("0123456789", 1, 6)
			default:
				pool[i].message = strings.Repeat("long message 42 ", 100)
			}
		}
		picks := make([]int, rt.IntRange(1, rt.IntRange(1, 2000)))
		for i := range picks {
			picks[i] = rt.IntRange(0, len(pool)-1)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(picks); i += 4 {
					f := pool[picks[i]]
					if got, w := Fingerprint(f.errorType, f.message), want(f.errorType, f.message); got != w {
						errs <- fmt.Sprintf("Fingerprint(%q, %q) = %s, want %s", f.errorType, f.message, got, w)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			rt.Fatal(e)
		}
	})
}
