package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The quickstart runs on a fresh embedded store and shows what it promises:
// a retried task that succeeds, a task dead with its full history, and the
// same task succeeding in its second life after a redrive. It also runs
// again on the same store.
func TestQuickstart(t *testing.T) {
	t.Setenv("RDQ_DATABASE_URL", "sqlite:"+filepath.Join(t.TempDir(), "quickstart.db"))
	for i := 1; i <= 2; i++ {
		var out bytes.Buffer
		if err := run(context.Background(), &out, false); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		for _, want := range []string{
			`handler send-receipt  status SUCCEEDED  life 0  attempts in this life 3`,
			`handler charge-card  status DEAD  life 0  attempts in this life 3`,
			`handler charge-card  status SUCCEEDED  life 1  attempts in this life 1`,
			`(?m)^\s+4\s+1\s+SUCCESS\s`,
		} {
			if !regexp.MustCompile(want).MatchString(out.String()) {
				t.Errorf("run %d: output lacks %q:\n%s", i, want, out.String())
			}
		}
	}
}
