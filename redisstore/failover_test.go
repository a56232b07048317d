package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/redisstore"
	"github.com/srjn45/rdq/store"
)

// TestClusterFailover drains tasks through a store with WaitReplicas 1 on
// a Redis Cluster of its own (RDQ_TEST_REDIS_FAILOVER_CLUSTER), SIGKILLs the master of one of the queues'
// slots mid-drain, and checks that its replica takes over, that work
// goes on, and that nothing the store acknowledged was lost: every task
// whose Enqueue returned is there and ends SUCCEEDED, and every Finish
// that returned is in its task's history. The killed node is restarted
// once its replica took over, and rejoins as the new master's replica:
// until then the shard has no replica, so its writes fail with
// ErrNotReplicated rather than being acknowledged unreplicated.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a master of the failover test cluster")
	}
	c := failoverClusterClient(t)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	ns := namespace(t, c)
	s, err := redisstore.New(c, redisstore.Config{Namespace: ns, WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	queues := make([]string, 8)
	for i := range queues {
		queues[i] = "q" + strconv.Itoa(i)
	}
	victim, err := c.MasterForKey(ctx, ns+":{"+queues[0]+"}")
	if err != nil {
		t.Fatal(err)
	}
	addr := victim.Options().Addr
	info, err := victim.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid, conf := infoField(info, "process_id"), infoField(info, "config_file")
	if pid == "" || conf == "" {
		t.Fatalf("INFO server of %s names no process_id or config_file:\n%s", addr, info)
	}
	role, err := victim.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 {
		t.Fatalf("ROLE of %s = %v, %v", addr, role, err)
	}
	reps, _ := role[2].([]any)
	if len(reps) == 0 {
		t.Fatalf("the master %s has no replica to take over: run scripts/redis-cluster.sh", addr)
	}
	r0, _ := reps[0].([]any)
	if len(r0) < 2 {
		t.Fatalf("ROLE of %s: malformed replica %v", addr, reps[0])
	}
	replica := redis.NewClient(&redis.Options{Addr: fmt.Sprint(r0[0]) + ":" + fmt.Sprint(r0[1])})
	t.Cleanup(func() {
		if err := replica.Close(); err != nil {
			t.Error(err)
		}
	})
	// However the test ends, the killed node is started again.
	killed := false
	t.Cleanup(func() {
		if killed {
			restart(t, c, addr, conf)
		}
	})

	var mu sync.Mutex
	enqueued := map[rdq.ID]bool{}
	finished := map[rdq.ID]int64{}
	var enqErrs, finErrs int
	var firstAfterKill time.Time
	var killedAt time.Time
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(enqueued), len(finished)
	}
	stop := make(chan struct{})
	pace := func() bool {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
			return true
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the producer: a batch across the queues, repeated until acknowledged
		defer wg.Done()
		for {
			batch := make([]store.NewTask, len(queues))
			for i, q := range queues {
				batch[i] = store.NewTask{ID: rdq.NewID(), Queue: q, Handler: "h", Payload: []byte("x"), MaxAttempts: 3}
			}
			for {
				_, err := s.Enqueue(ctx, store.EnqueueParams{Tasks: batch})
				mu.Lock()
				if err == nil {
					for _, nt := range batch {
						enqueued[nt.ID] = true
					}
					if !killedAt.IsZero() && firstAfterKill.IsZero() {
						firstAfterKill = time.Now()
					}
				} else {
					enqErrs++
				}
				mu.Unlock()
				if err == nil || !pace() {
					break
				}
			}
			if !pace() {
				return
			}
		}
	}()
	go func() { // the consumer: claims, and finishes what it claimed
		defer wg.Done()
		for pace() {
			drainOnce(ctx, s, queues, &mu, finished, &finErrs)
		}
	}()

	waitFor(t, 60*time.Second, "300 tasks enqueued and 50 finished before the kill", func() bool {
		e, f := count()
		return e >= 300 && f >= 50
	})
	before, _ := count()
	n, _ := strconv.Atoi(pid)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("SIGKILL of the master %s (pid %d): %v", addr, n, err)
	}
	killed = true
	waitFor(t, 60*time.Second, "the replica "+replica.Options().Addr+" promoted", func() bool {
		r, err := replica.Do(ctx, "ROLE").Slice()
		return err == nil && len(r) > 0 && r[0] == "master"
	})
	promoted := time.Since(killedAt)
	restart(t, c, addr, conf)
	killed = false
	rejoined := time.Since(killedAt)
	waitFor(t, 90*time.Second, "300 more tasks enqueued after the kill", func() bool {
		e, _ := count()
		return e >= before+300
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("master %s killed after %d acknowledged enqueues; its replica promoted after %s; the killed node back as a replica after %s; enqueues acknowledged again after %s; %d enqueue and %d claim/finish calls failed meanwhile",
		addr, before, promoted.Round(time.Millisecond), rejoined.Round(time.Millisecond), firstAfterKill.Sub(killedAt).Round(time.Millisecond), enqErrs, finErrs)
	mu.Unlock()

	// The rest is drained, expired leases (of claims lost with the master)
	// taken over and given back to wait, as a worker's reclaim does.
	waitFor(t, 120*time.Second, "every enqueued task finished", func() bool {
		reclaimed, err := s.ReclaimExpired(ctx, store.ReclaimParams{Queues: queues, Limit: 100, Lease: 5 * time.Second, WorkerID: "reclaimer"})
		if err != nil {
			t.Logf("reclaim: %v", err)
		}
		if len(reclaimed) > 0 {
			back := make([]store.Completion, len(reclaimed))
			for i, r := range reclaimed {
				back[i] = store.Completion{Lease: store.Lease{ID: r.ID, Token: r.LeaseToken}, Status: rdq.StatusPending}
			}
			if _, err := s.Finish(ctx, store.FinishParams{Completions: back}); err != nil {
				t.Logf("giving reclaimed tasks back: %v", err)
			}
		}
		drainOnce(ctx, s, queues, &mu, finished, &finErrs)
		st, err := s.Stats(ctx, store.StatsParams{})
		if err != nil {
			return false
		}
		for _, q := range st {
			if q.Pending+q.InFlight > 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for id := range enqueued {
		task, atts, err := s.Get(ctx, id)
		if err != nil {
			t.Errorf("acknowledged task %s: %v", id, err)
			continue
		}
		if task.Status != rdq.StatusSucceeded {
			t.Errorf("acknowledged task %s is %s, want %s", id, task.Status, rdq.StatusSucceeded)
		}
		if tok, ok := finished[id]; ok && !hasSuccess(atts, tok) {
			t.Errorf("task %s: the acknowledged finish of lease %d is not in its history %+v", id, tok, atts)
		}
	}
	t.Logf("%d acknowledged tasks, %d acknowledged finishes checked", len(enqueued), len(finished))
}

// drainOnce claims a batch and finishes it, recording each acknowledged
// finish's lease token.
func drainOnce(ctx context.Context, s *redisstore.Store, queues []string, mu *sync.Mutex, finished map[rdq.ID]int64, errs *int) {
	tasks, err := s.Claim(ctx, store.ClaimParams{Queues: queues, Limit: 16, Lease: 5 * time.Second, WorkerID: "drainer"})
	if err != nil {
		mu.Lock()
		*errs++
		mu.Unlock()
		return
	}
	if len(tasks) == 0 {
		return
	}
	cs := make([]store.Completion, len(tasks))
	for i, t := range tasks {
		cs[i] = store.Completion{Lease: store.Lease{ID: t.ID, Token: t.LeaseToken}, Status: rdq.StatusSucceeded,
			Attempt: &store.AttemptRecord{Outcome: rdq.OutcomeSuccess, WorkerID: "drainer"}}
	}
	res, err := s.Finish(ctx, store.FinishParams{Completions: cs})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		*errs++
		return
	}
	for i, e := range res {
		if e == nil {
			finished[tasks[i].ID] = tasks[i].LeaseToken
		}
	}
}

func hasSuccess(atts []rdq.Attempt, token int64) bool {
	for _, a := range atts {
		if a.LeaseToken == token && a.Outcome == rdq.OutcomeSuccess {
			return true
		}
	}
	return false
}

// restart starts the killed node again from its configuration file and
// waits until it is a replica again and the cluster is whole.
func restart(t *testing.T, c *redis.ClusterClient, addr, conf string) {
	t.Helper()
	if out, err := exec.Command("redis-server", conf).CombinedOutput(); err != nil {
		t.Errorf("restarting %s (redis-server %s): %v\n%s", addr, conf, err, out)
		return
	}
	node := redis.NewClient(&redis.Options{Addr: addr})
	defer func() {
		if err := node.Close(); err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, 60*time.Second, "the killed node back as a replica, and the cluster ok", func() bool {
		role, err := node.Do(context.Background(), "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "slave" {
			return false
		}
		info, err := c.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// infoField reads a field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// TestWaitReplicasWithoutReplicas checks that WaitReplicas is enforced: on
// the standalone test server, which has no replica, a write fails with
// ErrNotReplicated (after the master applied it), and a bad setting is
// refused.
func TestWaitReplicasWithoutReplicas(t *testing.T) {
	c := client(t)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ns := namespace(t, c)
	s, err := redisstore.New(c, redisstore.Config{Namespace: ns, WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	nt := store.NewTask{ID: rdq.NewID(), Queue: "q", Handler: "h", MaxAttempts: 1}
	_, err = s.Enqueue(t.Context(), store.EnqueueParams{Tasks: []store.NewTask{nt}})
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Enqueue with WaitReplicas 1 and no replica = %v, want ErrNotReplicated", err)
	}
	if _, err := redisstore.New(c, redisstore.Config{WaitReplicas: -1}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("New with WaitReplicas -1 = %v, want rdq.ErrInvalid", err)
	}
}
