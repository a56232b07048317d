package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The quickstart runs on Redis too, given RDQ_DATABASE_URL=redis://…: here
// the test Redis (RDQ_TEST_REDIS_URL, or where scripts/redis.sh starts it)
// in a namespace of its own, whose keys are deleted afterwards.
func TestQuickstartOnRedis(t *testing.T) {
	raw := os.Getenv("RDQ_TEST_REDIS_URL")
	if raw == "" {
		raw = "redis://127.0.0.1:6390/0"
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("RDQ_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, err)
		}
		t.Skipf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "quickstart-" + hex.EncodeToString(b)
	defer func() {
		keys, err := c.Keys(context.Background(), ns+":*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(context.Background(), keys...).Err()
		}
		if err != nil {
			t.Errorf("deleting the keys of %s: %v", ns, err)
		}
	}()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("namespace", ns)
	u.RawQuery = q.Encode()
	t.Setenv("RDQ_DATABASE_URL", u.String())

	var out bytes.Buffer
	if err := run(context.Background(), &out, false); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`Redis at `,
		`handler send-receipt  status SUCCEEDED  life 0  attempts in this life 3`,
		`handler charge-card  status DEAD  life 0  attempts in this life 3`,
		`handler charge-card  status SUCCEEDED  life 1  attempts in this life 1`,
		`(?m)^\s+4\s+1\s+SUCCESS\s`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The quickstart runs on a Redis Cluster as well, given a
// redis+cluster:// seed list: here the test cluster
// (RDQ_TEST_REDIS_CLUSTER, as scripts/redis-cluster.sh prints it).
func TestQuickstartOnRedisCluster(t *testing.T) {
	seeds := os.Getenv("RDQ_TEST_REDIS_CLUSTER")
	if seeds == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("RDQ_TEST_REDIS_CLUSTER is unset: run scripts/redis-cluster.sh and set it to the seed list it prints")
		}
		t.Skip("RDQ_TEST_REDIS_CLUSTER is unset: run scripts/redis-cluster.sh and set it to the seed list it prints")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis Cluster at %s (%v): run scripts/redis-cluster.sh", seeds, err)
		}
		t.Skipf("no Redis Cluster at %s (%v): run scripts/redis-cluster.sh", seeds, err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "quickstart-" + hex.EncodeToString(b)
	defer func() {
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			keys, err := node.Keys(ctx, ns+":*").Result()
			for _, k := range keys {
				if err == nil {
					err = node.Del(ctx, k).Err()
				}
			}
			return err
		})
		if err != nil {
			t.Errorf("deleting the keys of %s: %v", ns, err)
		}
	}()
	t.Setenv("RDQ_DATABASE_URL", "redis+cluster://"+seeds+"/?namespace="+ns)

	var out bytes.Buffer
	if err := run(context.Background(), &out, false); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`Redis at redis\+cluster://`,
		`handler send-receipt  status SUCCEEDED  life 0  attempts in this life 3`,
		`handler charge-card  status DEAD  life 0  attempts in this life 3`,
		`handler charge-card  status SUCCEEDED  life 1  attempts in this life 1`,
		`(?m)^\s+4\s+1\s+SUCCESS\s`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
