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

// The consumer hands its three failed messages to rdq: the two that failed
// on the outage succeed once the index recovers, and the malformed one is
// dead-lettered at once with its permanent failure as its history.
func TestConsumer(t *testing.T) {
	t.Setenv("RDQ_DATABASE_URL", "sqlite:"+filepath.Join(t.TempDir(), "consumer.db"))
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	if n := len(regexp.MustCompile(`handed to rdq as .*, offset committed`).FindAllString(got, -1)); n != 3 {
		t.Errorf("%d messages handed to rdq, want 3:\n%s", n, got)
	}
	if n := len(regexp.MustCompile(`: SUCCEEDED after \d+ attempts`).FindAllString(got, -1)); n != 2 {
		t.Errorf("%d tasks succeeded, want 2:\n%s", n, got)
	}
	if !regexp.MustCompile(`: DEAD after 1 attempt\n\s+#1 PERMANENT_FAILURE decoding order`).MatchString(got) {
		t.Errorf("the malformed message is not dead with its history:\n%s", got)
	}
}
