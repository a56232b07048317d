package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storetest"
)

// defaultURL is where scripts/redis.sh starts the test suite's Redis.
const defaultURL = "redis://127.0.0.1:6390/0"

// testURL is the Redis the tests use: RDQ_TEST_REDIS_URL, or defaultURL.
func testURL() string {
	if u := os.Getenv("RDQ_TEST_REDIS_URL"); u != "" {
		return u
	}
	return defaultURL
}

// client connects to the test Redis, skipping the test when there is none
// (failing under CI=true, where scripts/redis.sh started it).
func client(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testURL())
	if err != nil {
		t.Fatalf("RDQ_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	if err := c.Ping(t.Context()).Err(); err != nil {
		if cerr := c.Close(); cerr != nil {
			t.Error(cerr)
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, err)
		}
		t.Skipf("no Redis at %s (%v): run scripts/redis.sh", opt.Addr, err)
	}
	return c
}

// clusterSeeds is the seed list of the test Redis Cluster:
// RDQ_TEST_REDIS_CLUSTER, as scripts/redis-cluster.sh prints it.
func clusterSeeds() string { return os.Getenv("RDQ_TEST_REDIS_CLUSTER") }

// clusterClient connects to the test Redis Cluster, skipping the test when
// RDQ_TEST_REDIS_CLUSTER is unset or the cluster does not answer (failing
// under CI=true, where scripts/redis-cluster.sh started it).
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	return clusterClientOf(t, "RDQ_TEST_REDIS_CLUSTER", "scripts/redis-cluster.sh")
}

// failoverClusterClient connects to the cluster TestClusterFailover kills
// a master of (RDQ_TEST_REDIS_FAILOVER_CLUSTER): one of its own, so the
// other packages' cluster tests, which may run at the same time, never
// meet a failover.
func failoverClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	return clusterClientOf(t, "RDQ_TEST_REDIS_FAILOVER_CLUSTER",
		`RDQ_REDIS_CLUSTER_PORTS="7111 7112 7113 7114 7115 7116" RDQ_REDIS_CLUSTER_DIR=/var/lib/rdq-test-redis-failover-cluster scripts/redis-cluster.sh`)
}

// clusterClientOf connects to the cluster whose seed list env holds,
// skipping the test when it is unset or the cluster does not answer
// (failing under CI=true); start says how to start one.
func clusterClientOf(t testing.TB, env, start string) *redis.ClusterClient {
	t.Helper()
	seeds := os.Getenv(env)
	if seeds == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset: run %s and set it to the seed list it prints", env, start)
		}
		t.Skipf("%s is unset: run %s and set it to the seed list it prints", env, start)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	if err := c.Ping(t.Context()).Err(); err != nil {
		if cerr := c.Close(); cerr != nil {
			t.Error(cerr)
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis Cluster at %s (%s: %v): run %s", seeds, env, err, start)
		}
		t.Skipf("no Redis Cluster at %s (%s: %v): run %s", seeds, env, err, start)
	}
	return c
}

// namespace returns a fresh namespace and deletes its keys when t ends
// (on every master of a cluster).
func namespace(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "t-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return dropKeys(ctx, node, ns) })
		} else {
			err = dropKeys(ctx, c, ns)
		}
		if err != nil {
			t.Errorf("deleting the keys of %s: %v", ns, err)
		}
	})
	return ns
}

// dropKeys deletes the keys of namespace ns on one server, one command
// per key (a cluster refuses a command on keys of several slots).
func dropKeys(ctx context.Context, c redis.UniversalClient, ns string) error {
	iter := c.Scan(ctx, 0, ns+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("listing: %w", err)
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}

// openStore returns a store in a fresh namespace, and a locator (a URL
// with the namespace) that Open reaches it by.
func openStore(t testing.TB) (*redisstore.Store, string) {
	t.Helper()
	c := client(t)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ns := namespace(t, c)
	s, err := redisstore.New(c, redisstore.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(redisstore.NamespaceParam, ns)
	u.RawQuery = q.Encode()
	return s, u.String()
}

// openClusterStore is openStore on the test Redis Cluster; its locator
// is a redis+cluster:// URL of the seed list.
func openClusterStore(t testing.TB) (*redisstore.Store, string) {
	t.Helper()
	c := clusterClient(t)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ns := namespace(t, c)
	s, err := redisstore.New(c, redisstore.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s, "redis+cluster://" + clusterSeeds() + "?" + redisstore.NamespaceParam + "=" + ns
}

// harness runs the compliance kit on the test Redis: each test gets a
// namespace of its own, and the locator is the URL with that namespace.
func harness() storetest.Harness { return harnessOn(openStore) }

// harnessOn is the kit's harness with stores from open.
func harnessOn(open func(testing.TB) (*redisstore.Store, string)) storetest.Harness {
	return storetest.Harness{
		NewStore: func(t testing.TB) (store.Store, string) {
			t.Helper()
			return open(t)
		},
		Open: func(ctx context.Context, locator string) (store.Store, func() error, error) {
			s, err := redisstore.Open(ctx, locator, redisstore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		// A script runs alone on the server: there are no row locks for a
		// claim to pass over, so no LockTask.
		FailAudit: failAudit,
		Capabilities: storetest.Capabilities{
			Notifications: true, Admin: true, Pause: true, Snooze: true, RetryInPlace: true,
			NotDueCounts: true, DeadHistogram: true, DeadGroupKeys: true, Live: true, Registry: true, PauseHandlers: true,
			Series: true, WaitingCounts: true, GroupOrigins: true,
		},
	}
}

func TestMain(m *testing.M) { storetest.Main(m, harness()) }

func TestCompliance(t *testing.T) { storetest.Run(t, harness()) }

// TestComplianceCluster runs the whole kit on the test Redis Cluster
// (RDQ_TEST_REDIS_CLUSTER): every script must keep to one queue's slot,
// or the cluster refuses it.
func TestComplianceCluster(t *testing.T) {
	if err := clusterClient(t).Close(); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, harnessOn(openClusterStore))
}

// failAudit makes the audit writes of the store a locator names fail: its
// audit sequence becomes a value INCR refuses, and INCR is the first write
// of every script that audits.
func failAudit(t testing.TB, locator string) {
	t.Helper()
	u, err := url.Parse(locator)
	if err != nil {
		t.Fatal(err)
	}
	ns := u.Query().Get(redisstore.NamespaceParam)
	var c redis.UniversalClient
	if u.Scheme == "redis+cluster" {
		c = clusterClient(t)
	} else {
		c = client(t)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Set(t.Context(), ns+":auditseq", "audit writes refused by the test", 0).Err(); err != nil {
		t.Fatalf("making the audit writes of %s fail: %v", ns, err)
	}
}
