package main

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEnginesDrainEveryTask runs both halves at a small size on the test
// Redis (in database 14, which it empties): each drains every task, and
// with -fail-once fails each exactly once first.
func TestEnginesDrainEveryTask(t *testing.T) {
	raw := os.Getenv("RDQ_TEST_REDIS_URL")
	if raw == "" {
		raw = "redis://127.0.0.1:6390/0"
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	perr := c.Ping(t.Context()).Err()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, perr)
		}
		t.Skipf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, perr)
	}
	url := "redis://" + opt.Addr + "/14"
	const n = 300
	for _, engine := range []string{"rdq", "asynq"} {
		for _, failOnce := range []bool{false, true} {
			r, err := run(context.Background(), config{engine: engine, redisURL: url, n: n, failOnce: failOnce, slots: 50})
			if err != nil {
				t.Fatalf("%s (fail-once %v): %v", engine, failOnce, err)
			}
			wantFailed := int64(0)
			if failOnce {
				wantFailed = n
			}
			if r.done != n || r.failed != wantFailed {
				t.Errorf("%s (fail-once %v): %d succeeded and %d failed, want %d and %d", engine, failOnce, r.done, r.failed, n, wantFailed)
			}
		}
	}
}
