package prop

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestDrawsStayInRange(t *testing.T) {
	cases := 0
	Check(t, func(t *T) {
		cases++
		if v := t.IntRange(-3, 4); v < -3 || v > 4 {
			t.Fatalf("IntRange(-3, 4) = %d", v)
		}
		if v := t.Int64Range(10, 10); v != 10 {
			t.Fatalf("Int64Range(10, 10) = %d", v)
		}
		if v := t.Float64Range(1, 2); v < 1 || v > 2 {
			t.Fatalf("Float64Range(1, 2) = %v", v)
		}
		if s := t.StringOf("ab€", 2, 5); utf8.RuneCountInString(s) < 2 || utf8.RuneCountInString(s) > 5 || strings.Trim(s, "ab€") != "" {
			t.Fatalf("StringOf(ab€, 2, 5) = %q", s)
		}
		if s := t.String(30); !utf8.ValidString(s) || utf8.RuneCountInString(s) > 30 {
			t.Fatalf("String(30) = %q", s)
		}
		if b := t.Bytes(16); len(b) != 16 {
			t.Fatalf("Bytes(16) has %d bytes", len(b))
		}
		if v := Pick(t, "x", "y"); v != "x" && v != "y" {
			t.Fatalf("Pick = %q", v)
		}
	})
	if cases != Cases {
		t.Fatalf("Check ran %d cases, want %d", cases, Cases)
	}
}

func TestSeedReplaysOneCase(t *testing.T) {
	t.Setenv(EnvSeed, "42")
	var draws []int
	for range 2 {
		Check(t, func(t *T) { draws = append(draws, t.IntRange(0, 1<<30)) })
	}
	if len(draws) != 2 || draws[0] != draws[1] {
		t.Fatalf("two checks with %s=42 drew %v, want one equal draw each", EnvSeed, draws)
	}
}
