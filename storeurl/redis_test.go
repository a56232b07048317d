package storeurl_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
)

// redisURL returns the test Redis's URL (RDQ_TEST_REDIS_URL, or where
// scripts/redis.sh starts it) with a fresh namespace whose keys are
// deleted when t ends, skipping the test when there is no Redis (failing
// under CI=true).
func redisURL(t *testing.T) string {
	t.Helper()
	raw := os.Getenv("RDQ_TEST_REDIS_URL")
	if raw == "" {
		raw = "redis://127.0.0.1:6390/0"
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("RDQ_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
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
	ns := "storeurl-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := c.Keys(ctx, ns+":*").Result()
		if err != nil {
			t.Errorf("listing the keys of %s: %v", ns, err)
			return
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("deleting the keys of %s: %v", ns, err)
			}
		}
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("namespace", ns)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestOpenRedis(t *testing.T) {
	t.Parallel()
	raw := redisURL(t)
	tg, err := storeurl.Parse(raw)
	if err != nil || tg.Kind != storeurl.Redis {
		t.Fatalf("Parse(%s) = %+v, %v; want Kind Redis", raw, tg, err)
	}
	s, err := storeurl.Open(t.Context(), raw, storeurl.Config{})
	if err != nil {
		t.Fatalf("Open(%s): %v", storeurl.Describe(raw), err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, ok := store.NotifierOf(s); !ok {
		t.Error("the Redis store does not implement store.Notifier")
	}
	roundTrip(t, s)
}

func TestRedisURLs(t *testing.T) {
	for _, raw := range []string{"redis://:s3cret@127.0.0.1:1/0", "rediss://app:s3cret@cache.example:6380/2?namespace=billing"} {
		tg, err := storeurl.Parse(raw)
		if err != nil || tg.Kind != storeurl.Redis {
			t.Errorf("Parse(%q) = %+v, %v; want Kind Redis", raw, tg, err)
		}
		d := storeurl.Describe(raw)
		if !strings.HasPrefix(d, "Redis at ") || strings.Contains(d, "s3cret") {
			t.Errorf("Describe(%q) = %q; want Redis at the URL without its password", raw, d)
		}
	}
	if d := storeurl.Describe("rediss://cache.example:6380/2?namespace=billing"); !strings.Contains(d, "namespace=billing") {
		t.Errorf("Describe hides the namespace: %q", d)
	}
	if _, err := storeurl.Parse("redis:///0"); err == nil {
		t.Error("Parse of a Redis URL without a host succeeded")
	}
	_, err := storeurl.Open(t.Context(), "redis://:s3cret@127.0.0.1:1/0", storeurl.Config{})
	if err == nil {
		t.Fatal("Open of an unreachable Redis succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
}

// TestOpenRedisCluster opens a store on the test Redis Cluster by a
// redis+cluster:// seed list, as rdq and rdq-server do with
// RDQ_DATABASE_URL, and round-trips a task through it.
func TestOpenRedisCluster(t *testing.T) {
	t.Parallel()
	seeds := os.Getenv("RDQ_TEST_REDIS_CLUSTER")
	if seeds == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("RDQ_TEST_REDIS_CLUSTER is unset: run scripts/redis-cluster.sh and set it to the seed list it prints")
		}
		t.Skip("RDQ_TEST_REDIS_CLUSTER is unset: run scripts/redis-cluster.sh and set it to the seed list it prints")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
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
	ns := "storeurl-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			keys, err := node.Keys(ctx, ns+":*").Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := node.Del(ctx, k).Err(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("deleting the keys of %s: %v", ns, err)
		}
	})
	raw := "redis+cluster://" + seeds + "/?namespace=" + ns
	tg, err := storeurl.Parse(raw)
	if err != nil || tg.Kind != storeurl.Redis {
		t.Fatalf("Parse(%s) = %+v, %v; want Kind Redis", raw, tg, err)
	}
	if d := storeurl.Describe(raw); !strings.Contains(d, seeds) {
		t.Errorf("Describe(%s) = %q, want the seed list", raw, d)
	}
	s, err := storeurl.Open(t.Context(), raw, storeurl.Config{})
	if err != nil {
		t.Fatalf("Open(%s): %v", storeurl.Describe(raw), err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	roundTrip(t, s)
	if _, err := storeurl.Open(t.Context(), "redis+cluster://"+seeds+"/3", storeurl.Config{}); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("Open of a cluster URL with database 3 = %v, want an error saying a cluster has no database", err)
	}
}
