package rdq

import (
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/srjn45/rdq/internal/prop"
)

// TestNormalizeMessageIDShapes: the id shapes services print are masked,
// each as one token.
func TestNormalizeMessageIDShapes(t *testing.T) {
	for _, c := range []struct{ shape, id string }{
		{"stripe", "ch_3NfAbcDeFgHiJk"},
		{"stripe without digits", "cus_NfAbcDeFgHiJkL"},
		{"stripe payment intent", "pi_3MtwBwLkdIwHu7ix28a3tqPa"},
		{"base62", "Xk7pQ2mZ9rTb"},
		{"base62 without digits", "XkpQmZrTbWvNcQ"},
		{"base32", "mfrggzdfmztwq2lk"},
		{"base32 without digits", "mfrggzdfmztwqlkq"},
		{"kubernetes pod", "api-7d9f8b6c4-x2v9q"},
		{"kubernetes pod without digits", "api-bcdfghjkmt-xkvzq"},
		{"ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"},
		{"letters only", "ordqwxyzabc"},
		{"letters only, prefixed", "ord_qwxyzabc"},
		{"vowelless", "bcdfgh"},
		{"hex letters", "deadbeef"},
	} {
		if got := NormalizeMessage("order " + c.id + " failed"); got != "order <id> failed" && got != "order <hex> failed" {
			t.Errorf("%s: NormalizeMessage(%q) = %q, want the id masked", c.shape, "order "+c.id+" failed", got)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`order "acme:ord_1" failed`, `order "<v>" failed`},
		{`orders 'ord_1,ord_2,ord_3'`, `orders '<v>'`},
		{"key `tenant=acme,id=42`", "key `<v>`"},
		{`relation "orders_2024_11"`, `relation "<id>"`},
		{`field "email" is required`, `field "email" is required`},
		{`{"error":"not_found","id":"x1:y2"}`, `{"error":"not_found","id":"<v>"}`},
		{`get "https://h/a/1": eof`, `get "https://h/a/<n>": eof`},
		{`can't find 'a:1'`, `can't find '<v>'`},
		{`"a:1 b"`, `"a:<n> b"`},
		{`""`, `""`},
	} {
		if got := NormalizeMessage(c.in); got != c.want {
			t.Errorf("NormalizeMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// keptWords are words and phrases that must keep their shape: error texts
// of Go, the network, databases, gRPC and Java, technical words, and long
// English words.
var keptWords = []string{
	"connection refused", "connection reset by peer", "broken pipe", "no such host", "i/o timeout",
	"context deadline exceeded", "context canceled", "unexpected eof", "use of closed network connection",
	"tls: handshake failure", "certificate signed by unknown authority", "server misbehaving",
	"temporary failure in name resolution", "too many open files", "address already in use",
	"no space left on device", "resource temporarily unavailable", "operation timed out",
	"econnrefused", "econnreset", "etimedout", "ehostunreach", "enetunreach", "eaddrinuse",
	"sql: no rows in result set", "duplicate key value violates unique constraint", "deadlock detected",
	"could not serialize access due to concurrent update", "database is locked", "too many connections",
	"canceled", "unknown", "invalid argument", "deadline exceeded", "not found", "already exists",
	"permission denied", "resource exhausted", "failed precondition", "aborted", "out of range",
	"unimplemented", "internal", "unavailable", "data loss", "unauthenticated",
	"nullpointerexception", "illegalargumentexception", "illegalstateexception", "sockettimeoutexception",
	"connectexception", "sqlexception", "unknownhostexception", "timeoutexception", "outofmemoryerror",
	"concurrentmodificationexception", "indexoutofboundsexception", "connectionrefusederror",
	"postgresql", "kubernetes", "localhost", "upstream", "downstream", "workqueue", "keepalive",
	"goroutine", "getaddrinfo", "healthcheck", "crashloopbackoff", "imagepullbackoff", "oomkilled",
	"throttled", "ratelimited", "checksum", "signature", "timestamp", "credentials", "authorization",
	"authentication", "subscription", "notification", "insufficient funds", "card declined",
	"webhooks", "elasticsearch", "cassandra", "zookeeper", "memcached", "dynamodb",
	"strengths", "lengths", "rhythms", "twelfths", "knightsbridge", "extraordinary", "acknowledgement",
	"straightforward", "breakthrough", "characteristics", "responsibilities", "psychological",
	"neighborhood", "keyboards", "playwright", "thumbnails", "bookkeeping", "withdrawal", "background",
	"everywhere", "afterwards", "handwriting", "highlights", "marshmallow", "lengthwise",
}

// TestNormalizeMessageKeepsWords: words stay words, alone and among ids;
// every HTTP status text keeps its shape.
func TestNormalizeMessageKeepsWords(t *testing.T) {
	words := keptWords
	for code := 100; code < 600; code++ {
		if s := http.StatusText(code); s != "" {
			words = append(words, strings.ToLower(s))
		}
	}
	for _, w := range words {
		if got := NormalizeMessage(w); got != w {
			t.Errorf("NormalizeMessage(%q) = %q, want it kept", w, got)
		}
	}
	prop.Check(t, func(rt *prop.T) {
		w := prop.Pick(rt, words...)
		id := "ord_" + rt.StringOf("0123456789", 1, 6)
		if rt.Bool() {
			id = rt.StringOf("0123456789abcdef", 8, 12)
		}
		msg := "order " + id + ": " + w
		if got, want := NormalizeMessage(msg), "order "+NormalizeMessage(id)+": "+w; got != want {
			rt.Fatalf("NormalizeMessage(%q) = %q, want %q", msg, got, want)
		}
	})
}

// TestNormalizeMessageMasksRandomLetters: letters-only ids drawn at random
// are masked, nearly all of them; the share grows with their length.
func TestNormalizeMessageMasksRandomLetters(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 19))
	draw := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	const lower = "abcdefghijklmnopqrstuvwxyz"
	for _, c := range []struct {
		what     string
		alphabet string
		prefix   string
		n        int
		min      float64
	}{
		{"ord + 8 letters", lower, "ord", 8, 0.85},
		{"10 letters", lower, "", 10, 0.9},
		{"14 letters", lower, "", 14, 0.95},
		{"base62 letters, 14", lower + strings.ToUpper(lower), "", 14, 0.95},
		{"kubernetes hash, 10", "bcdfghjklmnpqrstvwxz", "", 10, 0.99},
	} {
		const draws = 2000
		masked := 0
		for range draws {
			id := c.prefix + draw(c.alphabet, c.n)
			if NormalizeMessage("order "+id) == "order <id>" {
				masked++
			}
		}
		if share := float64(masked) / draws; share < c.min {
			t.Errorf("%s: %.3f of %d random ids masked, want at least %.2f", c.what, share, draws, c.min)
		}
	}
}

// TestNormalizeMatchersAgreeWithRegexps holds the hand-written matchers of
// NormalizeMessage to the regular expressions its doc comment states.
func TestNormalizeMatchersAgreeWithRegexps(t *testing.T) {
	prop.Check(t, func(rt *prop.T) {
		var s string
		switch rt.IntRange(0, 4) {
		case 0:
			s = rt.StringOf("-abcdefghijklmnopqrstuvwxyz0123456789_.+@x \t\n\x0B\f\r", 0, 40)
		case 1:
			s = rt.StringOf("0123456789abcdef-", 36, 36)
		case 2:
			s = prop.Pick(rt, "", "0x") + rt.StringOf("0123456789abcdef", 0, 10)
		case 3:
			s = rt.StringOf("0123456789.", 0, 8)
		default:
			s = rt.StringOf("0123456789", 3, 3)
		}
		for _, m := range []struct {
			name string
			re   *regexp.Regexp
			f    func(string) bool
		}{{"status", fpStatus, isStatus}, {"uuid", fpUUID, isUUID}, {"number", fpNumber, isNumber}, {"hex", fpHex, isHex}} {
			if got, want := m.f(s), m.re.MatchString(s); got != want {
				rt.Fatalf("%s(%q) = %v, regexp %v", m.name, s, got, want)
			}
		}
		if got, want := collapseSpace(s), strings.Trim(fpSpace.ReplaceAllString(s, " "), " "); got != want {
			rt.Fatalf("collapseSpace(%q) = %q, regexp %q", s, got, want)
		}
		var got [][]int
		for start := 0; start < len(s); {
			if !isTokenByte(s[start]) {
				start++
				continue
			}
			end := tokenEnd(s, start)
			got = append(got, []int{start, end})
			start = end
		}
		want := fpToken.FindAllStringIndex(s, -1)
		if len(got) != len(want) {
			rt.Fatalf("tokens of %q: %v, regexp %v", s, got, want)
		}
		for i := range got {
			if got[i][0] != want[i][0] || got[i][1] != want[i][1] {
				rt.Fatalf("tokens of %q: %v, regexp %v", s, got, want)
			}
		}
	})
}

// TestLetterPairCostInJava: the Java SDK carries the same table as
// letterPairCost.
func TestLetterPairCostInJava(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("java", "rdq", "src", "main", "java", "io", "github", "srjn45", "rdq", "Failures.java"))
	if err != nil {
		t.Fatal(err)
	}
	_, decl, ok := strings.Cut(string(src), "LETTER_PAIR_COST = \"\"")
	decl, _, ok2 := strings.Cut(decl, ";")
	if !ok || !ok2 {
		t.Fatal("Failures.java declares no LETTER_PAIR_COST")
	}
	var java strings.Builder
	for _, m := range regexp.MustCompile(`"([0-9a-f]*)"`).FindAllStringSubmatch(decl, -1) {
		java.WriteString(m[1])
	}
	if len(letterPairCost) != 27*27 {
		t.Fatalf("letterPairCost has %d digits, want 27×27", len(letterPairCost))
	}
	if java.String() != letterPairCost {
		t.Errorf("Failures.java's LETTER_PAIR_COST differs from letterPairCost")
	}
}
