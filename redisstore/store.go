package redisstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// DefaultNamespace is the Namespace of a Config that sets none.
const DefaultNamespace = "rdq"

// DefaultKeyRetention is the KeyRetention of a Config that sets none.
const DefaultKeyRetention = 7 * 24 * time.Hour

// Config configures a Store. The zero Config is valid.
type Config struct {
	// Namespace prefixes every key of the store, so several rdq
	// installations (or test runs) share one Redis without seeing each
	// other: 1 to 64 ASCII letters, digits, '.', '_' or '-'. Empty means
	// DefaultNamespace.
	Namespace string
	// KeyRetention is how long an idempotency key outlives its task once
	// the task was purged by retention: a resubmission within it is
	// answered as a purged duplicate. Zero means DefaultKeyRetention;
	// negative is invalid.
	KeyRetention time.Duration
	// Logger receives the store's warnings. Nil discards them.
	Logger *slog.Logger
	// RequireDurable makes Open refuse a server whose settings can lose
	// tasks it acknowledged (see CheckDurability), or whose settings it
	// cannot read. By default Open logs a warning for each and goes on.
	RequireDurable bool
	// WaitReplicas, when positive, makes every write of the store wait
	// until that many replicas of the master that took it acknowledged it
	// (Redis's WAIT, on the write's own connection), so a master that
	// fails after answering loses nothing its replica does not have: a
	// replica promoted by Sentinel or Redis Cluster holds every write the
	// store acknowledged. A write the replicas do not acknowledge within
	// WaitTimeout fails with ErrNotReplicated (the master applied it; a
	// retry is answered as the store's operations answer a repeat). Zero
	// waits for none: a failover may lose the writes of the last moments
	// before it (Redis replicates asynchronously). Negative is invalid.
	WaitReplicas int
	// WaitTimeout bounds each wait of WaitReplicas. Zero means
	// DefaultWaitTimeout; negative is invalid.
	WaitTimeout time.Duration
}

// DefaultWaitTimeout is the WaitTimeout of a Config that sets none.
const DefaultWaitTimeout = time.Second

// ErrNotReplicated is returned, with Config.WaitReplicas, by a write that
// the master applied but fewer replicas than asked acknowledged within
// Config.WaitTimeout: a failover now could lose it.
var ErrNotReplicated = errors.New("redisstore: the write was not acknowledged by the replicas Config.WaitReplicas asks for")

// Store is rdq's Redis backend. It implements store.Store and the optional
// capabilities the package documentation lists. It is safe for concurrent
// use.
type Store struct {
	c            redis.UniversalClient
	ns           string
	keyRetention time.Duration
	log          *slog.Logger
	// owned is set when Open made the client, which Close then closes.
	owned bool
	// leased remembers the queues of the tasks this store claimed.
	leased leased
	// known holds the queues this store recorded in N:queues.
	known sync.Map
	// waitReplicas and waitTimeout are Config.WaitReplicas and WaitTimeout.
	waitReplicas int
	waitTimeout  time.Duration
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// New returns a store on an existing client: a *redis.Client on one
// server, or a *redis.ClusterClient on a Redis Cluster (the same layout
// serves both). The caller keeps the client: Close does not close it.
func New(c redis.UniversalClient, cfg Config) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisstore.New: the client is nil", rdq.ErrInvalid)
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	if err := validNamespace(ns); err != nil {
		return nil, err
	}
	if cfg.KeyRetention < 0 {
		return nil, fmt.Errorf("%w: redisstore: KeyRetention is negative (%s); use a positive duration, or zero for %s", rdq.ErrInvalid, cfg.KeyRetention, DefaultKeyRetention)
	}
	if cfg.WaitReplicas < 0 || cfg.WaitTimeout < 0 {
		return nil, fmt.Errorf("%w: redisstore: WaitReplicas (%d) and WaitTimeout (%s) cannot be negative; use 0 for no wait, or a count of replicas and a timeout", rdq.ErrInvalid, cfg.WaitReplicas, cfg.WaitTimeout)
	}
	wt := cfg.WaitTimeout
	if wt == 0 {
		wt = DefaultWaitTimeout
	}
	kr := cfg.KeyRetention
	if kr == 0 {
		kr = DefaultKeyRetention
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Store{c: c, ns: ns, keyRetention: kr, log: log, waitReplicas: cfg.WaitReplicas, waitTimeout: wt}, nil
}

// Open connects to the Redis server a URL names (redis://, or rediss://
// for TLS, as go-redis's ParseURL reads them), or to a Redis Cluster
// (redis+cluster://, or rediss+cluster:// for TLS: a comma-separated seed
// list of nodes, "redis+cluster://user:password@host1:7001,host2:7002",
// with no database, and go-redis's cluster options as query parameters),
// and returns a store on it, which Close closes.
//
// The URL may carry the store's namespace as a query parameter,
// NamespaceParam ("redis://host:6379/0?namespace=billing"); it is removed
// before the URL reaches the client, and it overrides cfg.Namespace.
func Open(ctx context.Context, rawURL string, cfg Config) (*Store, error) {
	rawURL, ns, err := splitNamespace(rawURL)
	if err != nil {
		return nil, err
	}
	if ns != "" {
		cfg.Namespace = ns
	}
	var c redis.UniversalClient
	var where string
	if copt, ok, err := clusterOptions(rawURL); err != nil {
		return nil, err
	} else if ok {
		c, where = redis.NewClusterClient(copt), "cluster "+strings.Join(copt.Addrs, ",")
	} else {
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		c, where = redis.NewClient(opt), opt.Addr+" ("+redactedDB(opt)+")"
	}
	s, err := New(c, cfg)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	s.owned = true
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("redisstore: connecting to %s: %w", where, err), c.Close())
	}
	problems, err := s.CheckDurability(ctx)
	if err != nil {
		if cfg.RequireDurable {
			return nil, errors.Join(fmt.Errorf("redisstore: %s: durability required, and %w", where, err), c.Close())
		}
		s.log.WarnContext(ctx, "redisstore: could not check that the server keeps acknowledged tasks", "addr", where, "err", err)
	}
	for _, p := range problems {
		if cfg.RequireDurable {
			return nil, errors.Join(fmt.Errorf("%w: redisstore: %s can lose acknowledged tasks: %s", ErrNotDurable, where, strings.Join(problems, "; ")), c.Close())
		}
		s.log.WarnContext(ctx, "redisstore: the server can lose acknowledged tasks", "addr", where, "problem", p)
	}
	return s, nil
}

// clusterOptions reads a redis+cluster:// or rediss+cluster:// URL; ok is
// false for any other scheme.
func clusterOptions(rawURL string) (*redis.ClusterOptions, bool, error) {
	scheme, rest, found := strings.Cut(rawURL, "://")
	if !found {
		return nil, false, nil
	}
	var base string
	switch strings.ToLower(scheme) {
	case "redis+cluster":
		base = "redis"
	case "rediss+cluster":
		base = "rediss"
	default:
		return nil, false, nil
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" && path != "/0" {
		return nil, false, fmt.Errorf("%w: redisstore: a cluster URL names no database (got path %q): Redis Cluster has only database 0; want %s://host1:port1,host2:port2", rdq.ErrInvalid, path, scheme)
	}
	user := ""
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		user, authority = authority[:i+1], authority[i+1:]
	}
	var hosts []string
	for _, h := range strings.Split(authority, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, false, fmt.Errorf("%w: redisstore: a cluster URL names no node; want %s://host1:port1,host2:port2", rdq.ErrInvalid, scheme)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, false, fmt.Errorf("%w: redisstore: the cluster URL's query does not parse (%v)", rdq.ErrInvalid, err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	opt, err := redis.ParseClusterURL(base + "://" + user + hosts[0] + "?" + q.Encode())
	if err != nil {
		return nil, false, fmt.Errorf("%w: redisstore: cluster URL: %v", rdq.ErrInvalid, redactErr(err))
	}
	return opt, true, nil
}

// ErrNotDurable is returned by Open with Config.RequireDurable when the
// server's settings can lose tasks it acknowledged.
var ErrNotDurable = errors.New("redisstore: the Redis server is not configured to keep acknowledged tasks")

// CheckDurability reads the server's persistence and eviction settings
// (CONFIG GET) and returns what in them can lose a task the store
// acknowledged: no append-only file (appendonly no: what was written since
// the last snapshot is lost when the server stops), appendfsync no (the
// operating system decides when the file reaches the disk), and an
// eviction policy that may delete any key (maxmemory-policy allkeys-*).
// rdq requires appendonly yes and a policy that evicts no key of rdq's
// (noeviction; only the series counters expire, so the volatile-*
// policies evict at most series counts, never a task). appendfsync
// everysec, Redis's default, is accepted: a crash of the server process loses nothing acknowledged, and
// a crash of the whole host loses up to about a second of writes;
// appendfsync always closes that window at the cost of one fsync per
// write. An error means the settings could not be read (a managed
// service may refuse CONFIG).
//
// On Redis Cluster every node is checked, and each problem names its node.
func (s *Store) CheckDurability(ctx context.Context) ([]string, error) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return checkDurability(ctx, s.c)
	}
	var mu sync.Mutex
	var problems []string
	err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		ps, err := checkDurability(ctx, node)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range ps {
			problems = append(problems, node.Options().Addr+": "+p)
		}
		return nil
	})
	slices.Sort(problems)
	return problems, err
}

func checkDurability(ctx context.Context, c redis.Cmdable) ([]string, error) {
	cfg, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		return nil, fmt.Errorf("reading the server's settings (CONFIG GET): %w", err)
	}
	var problems []string
	if v := cfg["appendonly"]; v != "yes" {
		problems = append(problems, fmt.Sprintf("appendonly is %q: tasks written since the last snapshot are lost when the server stops; set appendonly yes", v))
	} else if v := cfg["appendfsync"]; v == "no" {
		problems = append(problems, `appendfsync is "no": a host crash loses what the operating system had not yet written; set appendfsync everysec or always`)
	}
	if v := cfg["maxmemory-policy"]; strings.HasPrefix(v, "allkeys-") {
		problems = append(problems, fmt.Sprintf("maxmemory-policy is %q: a full server deletes tasks; set maxmemory-policy noeviction", v))
	}
	return problems, nil
}

// NamespaceParam is the query parameter of a URL given to Open that names
// the store's namespace (Config.Namespace).
const NamespaceParam = "namespace"

// splitNamespace removes NamespaceParam from a URL and returns its value.
func splitNamespace(rawURL string) (string, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("%w: redisstore: the URL does not parse (%v); want redis://[user:password@]host:port/db", rdq.ErrInvalid, redactErr(err))
	}
	q := u.Query()
	ns := q.Get(NamespaceParam)
	if !q.Has(NamespaceParam) {
		return rawURL, "", nil
	}
	q.Del(NamespaceParam)
	u.RawQuery = q.Encode()
	return u.String(), ns, nil
}

// redactErr keeps a URL parse error's reason without the URL, which may
// hold a password.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "malformed URL"
}

func redactedDB(opt *redis.Options) string { return "db " + strconv.Itoa(opt.DB) }

// Close closes the client if Open made it.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return s.c.Close()
}

// Namespace returns the prefix of the store's keys.
func (s *Store) Namespace() string { return s.ns }

func validNamespace(ns string) error {
	if len(ns) > 64 {
		return fmt.Errorf("%w: redisstore: namespace %.64q... is %d bytes; the limit is 64", rdq.ErrInvalid, ns, len(ns))
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: redisstore: namespace %q contains %q; use letters, digits and . _ -", rdq.ErrInvalid, ns, rune(c))
		}
	}
	return nil
}

// nowArg is the "now" argument of a script: empty for the server's clock.
func nowArg(now *time.Time) string {
	if now == nil {
		return ""
	}
	return strconv.FormatInt(now.UnixMicro(), 10)
}

func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Enqueue implements store.Store. On Redis Cluster a batch is split by
// queue, one script per queue, run concurrently; on one server it is one
// script. Before them, the store records the queues
// (N:queues) and claims each task's ID in the index (SET N:id:ID Q NX): a
// task whose ID another queue holds is answered as that queue's task
// once the scripts ran. An index entry whose task the script did not
// insert (a duplicate by idempotency key) is removed after it.
func (s *Store) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	queues := make([]string, len(p.Tasks))
	for i, nt := range p.Tasks {
		if err := checkNew(nt); err != nil {
			return nil, fmt.Errorf("redisstore: task %d: %w", i, err)
		}
		queues[i] = nt.Queue
	}
	order, idx := groups(queues)
	if err := s.addQueues(ctx, order...); err != nil {
		return nil, fmt.Errorf("redisstore: enqueue: %w", err)
	}
	// owner[i] is the queue the index held for task i's ID before this
	// call ("" when this call set it).
	owner := make([]string, len(p.Tasks))
	cmds := make([]*redis.StatusCmd, len(p.Tasks))
	keys := make([]string, len(p.Tasks))
	for i, nt := range p.Tasks {
		keys[i] = s.idKey(nt.ID.String())
	}
	err := s.pipeline(ctx, keys, func(pipe redis.Pipeliner, i int) {
		cmds[i] = pipe.SetArgs(ctx, keys[i], p.Tasks[i].Queue, redis.SetArgs{Mode: "NX", Get: true})
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: enqueue: indexing the tasks' IDs: %w", err)
	}
	for i, c := range cmds {
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, fmt.Errorf("redisstore: enqueue: indexing task %s: %w", p.Tasks[i].ID, err)
		default:
			owner[i] = v
		}
	}
	out := make([]store.EnqueueResult, len(p.Tasks))
	mine := map[string][]int{}
	for _, q := range order {
		for _, i := range idx[q] {
			if owner[i] == "" || owner[i] == q {
				mine[q] = append(mine[q], i)
			}
		}
	}
	if !s.clustered() && len(order) > 1 {
		// One server: the whole batch is one script.
		var all []int
		for i := range p.Tasks {
			if owner[i] == "" || owner[i] == p.Tasks[i].Queue {
				all = append(all, i)
			}
		}
		order, mine = order[:1], map[string][]int{order[0]: all}
	}
	err = parallel(ctx, order, func(ctx context.Context, q string) error {
		if len(mine[q]) == 0 {
			return nil
		}
		return s.enqueueIn(ctx, q, p, mine[q], out)
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: enqueue: %w", err)
	}
	var drop []int
	for i := range p.Tasks {
		if owner[i] == "" && (out[i].Task == nil || out[i].Duplicate) {
			drop = append(drop, i)
		}
	}
	if len(drop) > 0 {
		dkeys := make([]string, len(drop))
		for j, i := range drop {
			dkeys[j] = keys[i]
		}
		evals := make([]*redis.Cmd, len(drop))
		err := s.pipeline(ctx, dkeys, func(pipe redis.Pipeliner, j int) {
			evals[j] = scriptUnindex.Eval(ctx, pipe, []string{dkeys[j]}, p.Tasks[drop[j]].Queue)
		})
		for _, e := range evals {
			err = errors.Join(err, e.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: enqueue: removing the index entries of duplicates: %w", err)
		}
	}
	for i, nt := range p.Tasks {
		if owner[i] == "" || owner[i] == nt.Queue {
			continue
		}
		fields, err := s.c.HGetAll(ctx, s.prefix(owner[i])+":t:"+nt.ID.String()).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: enqueue: reading task %s of queue %s: %w", nt.ID, owner[i], err)
		}
		if len(fields) == 0 {
			return nil, fmt.Errorf("redisstore: enqueue: task ID %s is held by queue %s, where no such task exists yet: an enqueue of it there is under way or did not finish; retry, or use a new ID", nt.ID, owner[i])
		}
		row := make([]any, 0, 2*len(fields))
		for k, v := range fields {
			row = append(row, k, v)
		}
		t, err := decodeTask(row)
		if err != nil {
			return nil, fmt.Errorf("redisstore: enqueue: task %d: %w", i, err)
		}
		out[i] = store.EnqueueResult{Task: t, Duplicate: true}
	}
	return out, nil
}

// enqueueIn runs the enqueue script of queue q for the tasks at idx.
func (s *Store) enqueueIn(ctx context.Context, q string, p store.EnqueueParams, idx []int, out []store.EnqueueResult) error {
	args := make([]any, 0, 3+18*len(idx))
	args = append(args, nowArg(p.Now), micros(s.keyRetention), len(idx))
	for _, i := range idx {
		nt := p.Tasks[i]
		ff := nt.FirstFailure
		var rec store.AttemptRecord
		if ff != nil {
			rec = *ff
		}
		args = append(args, nt.ID.String(), nt.Queue, nt.Handler, nt.Payload, nt.ContentType, encodeHeaders(nt.Headers),
			nt.IdempotencyKey, micros(max(nt.Delay, 0)), nt.MaxAttempts, micros(nt.Timeout), flag(ff != nil),
			string(rec.Outcome), cut(rec.Failure.Type), rec.Failure.Message, rec.Failure.Stack, cut(rec.Failure.Fingerprint),
			rec.WorkerID, micros(max(rec.Duration, 0)))
	}
	res, err := s.runQ(ctx, scriptEnqueue, q, args...)
	if err != nil {
		return fmt.Errorf("queue %s: %w", q, err)
	}
	rows, ok := res.([]any)
	if !ok || len(rows) != len(idx) {
		return fmt.Errorf("queue %s: unexpected reply %T", q, res)
	}
	for j, r := range rows {
		i := idx[j]
		row, _ := r.([]any)
		if len(row) == 0 {
			return fmt.Errorf("empty reply for task %d", i)
		}
		kind, _ := row[0].(string)
		switch kind {
		case "purged":
			if len(row) != 5 {
				return fmt.Errorf("malformed purged reply for task %d", i)
			}
			id, err := rdq.ParseID(str(row[1]))
			if err != nil {
				return fmt.Errorf("purged task's ID: %w", err)
			}
			out[i] = store.EnqueueResult{Duplicate: true, Purged: true, Task: &rdq.Task{
				ID: id, Queue: str(row[2]), IdempotencyKey: str(row[3]), CreatedAt: microTime(str(row[4])),
			}}
		case "new":
			if len(row) != 2 {
				return fmt.Errorf("malformed reply for task %d", i)
			}
			out[i] = store.EnqueueResult{Task: inserted(p.Tasks[i], microTime(str(row[1])))}
		case "dup":
			t, err := decodeTask(row[1:])
			if err != nil {
				return fmt.Errorf("task %d: %w", i, err)
			}
			out[i] = store.EnqueueResult{Task: t, Duplicate: true}
		default:
			return fmt.Errorf("unexpected reply kind %q", kind)
		}
	}
	return nil
}

// inserted is the task the enqueue script stored for nt at created, as Get
// would read it (the script returns only the time, not the task).
func inserted(nt store.NewTask, created time.Time) *rdq.Task {
	t := &rdq.Task{
		ID: nt.ID, Queue: nt.Queue, Handler: nt.Handler, Payload: bytes.Clone(nt.Payload), ContentType: nt.ContentType,
		Headers: maps.Clone(nt.Headers), IdempotencyKey: nt.IdempotencyKey, Status: rdq.StatusPending,
		NextAttemptAt: created.Add(time.Duration(max(nt.Delay, 0).Microseconds()) * time.Microsecond),
		CreatedAt:     created, UpdatedAt: created, MaxAttempts: nt.MaxAttempts,
		Timeout: time.Duration(nt.Timeout.Microseconds()) * time.Microsecond,
	}
	if ff := nt.FirstFailure; ff != nil {
		t.Attempts = 1
		t.LastError = rdq.ErrorSummary{Type: cut(ff.Failure.Type), Message: ff.Failure.Message, Fingerprint: cut(ff.Failure.Fingerprint)}
		if ff.Outcome == rdq.OutcomePermanentFailure {
			t.Status, t.FinishedAt = rdq.StatusDead, created
		}
	}
	return t
}

// checkNew refuses what the store cannot take, before anything is written:
// a script that failed halfway would leave half a batch.
func checkNew(nt store.NewTask) error {
	if nt.ID == (rdq.ID{}) {
		return fmt.Errorf("%w: the task has no ID (use rdq.NewID)", rdq.ErrInvalid)
	}
	if err := rdq.ValidateName("queue", nt.Queue); err != nil {
		return err
	}
	if err := rdq.ValidateName("handler", nt.Handler); err != nil {
		return err
	}
	if ff := nt.FirstFailure; ff != nil {
		switch ff.Outcome {
		case rdq.OutcomeRetryableFailure, rdq.OutcomePermanentFailure:
		default:
			return fmt.Errorf("%w: a first failure's outcome is %q; want %s or %s", rdq.ErrInvalid, ff.Outcome, rdq.OutcomeRetryableFailure, rdq.OutcomePermanentFailure)
		}
	}
	return nil
}

// cut caps an indexed text (error type, fingerprint) at rdq.MaxErrorTypeLength.
func cut(s string) string { return rdq.Truncate(s, rdq.MaxErrorTypeLength) }

// Claim implements store.Store. A claim of one queue is one script, and so
// is a claim of several on one server. On Redis Cluster a claim of
// several runs, per queue, a read of the due tasks it would
// lease (at most Limit each), merges them by due time, and then leases
// each queue's share of the Limit in one script per queue, concurrently:
// what another claimer took in between is not replaced, so such a claim
// may return fewer than Limit tasks while more are due.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if len(p.Queues) == 0 || p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: claim needs at least one queue and a limit of at least 1 (got %d queues, limit %d)", rdq.ErrInvalid, len(p.Queues), p.Limit)
	}
	qs := slices.Compact(slices.Sorted(slices.Values(p.Queues)))
	args := func(q string, limit int, dry bool) []any {
		a := make([]any, 0, 8+len(qs)+len(p.Handlers))
		a = append(a, nowArg(p.Now), micros(p.Lease), p.WorkerID, limit)
		if q == "" { // every queue, in one script
			a = append(a, len(qs))
			for _, q := range qs {
				a = append(a, q)
			}
		} else {
			a = append(a, 1, q)
		}
		a = append(a, len(p.Handlers))
		for _, h := range p.Handlers {
			a = append(a, h)
		}
		return append(a, flag(dry))
	}
	if len(qs) == 1 || !s.clustered() {
		res, err := s.runQ(ctx, scriptClaim, qs[0], args("", p.Limit, false)...)
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim: %w", err)
		}
		tasks, err := decodeRows(res)
		if err != nil {
			return nil, err
		}
		s.leased.add(tasks)
		return tasks, nil
	}
	quota := map[string]int{}
	{
		cands, err := s.peek(ctx, scriptClaim, qs, func(q string) []any { return args(q, p.Limit, true) })
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim: %w", err)
		}
		for _, c := range cands[:min(p.Limit, len(cands))] {
			quota[c.q]++
		}
	}
	var mu sync.Mutex
	var out []*rdq.Task
	err := parallel(ctx, slices.Sorted(maps.Keys(quota)), func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptClaim, q, args(q, quota[q], false)...)
		if err != nil {
			return err
		}
		tasks, err := decodeRows(res)
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, tasks...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	if len(quota) > 1 {
		slices.SortFunc(out, func(a, b *rdq.Task) int {
			return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), strings.Compare(a.ID.String(), b.ID.String()))
		})
	}
	s.leased.add(out)
	return out, nil
}

// peek runs a script in its dry mode on each queue (args gives its
// arguments) and returns the {score, ID} pairs they answered, merged by
// score.
func (s *Store) peek(ctx context.Context, sc *redis.Script, qs []string, args func(q string) []any) ([]scored, error) {
	var mu sync.Mutex
	var out []scored
	err := parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, sc, q, args(q)...)
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			v, _ := r.([]any)
			if len(v) != 2 {
				return fmt.Errorf("queue %s: malformed dry reply", q)
			}
			at, _ := strconv.ParseInt(str(v[0]), 10, 64)
			out = append(out, scored{at: at, id: str(v[1]), q: q})
		}
		return nil
	})
	slices.SortFunc(out, byScore)
	return out, err
}

// leaseBatch runs a script that answers 1 or 0 per item on each queue's
// items: queues[i] is item i's queue ("" for none: the lease is lost),
// head the script's arguments before the item count, and item(i) item
// i's arguments. A mixed script reads each item's queue from its
// arguments: on one server it takes every item in one call.
func (s *Store) leaseBatch(ctx context.Context, sc *redis.Script, queues []string, mixed bool, head []any, item func(i int) []any) ([]error, error) {
	errs := make([]error, len(queues))
	for i, q := range queues {
		if q == "" {
			errs[i] = store.ErrLeaseLost
		}
	}
	order, idx := groups(queues)
	if mixed && !s.clustered() && len(order) > 1 {
		var all []int
		for i, q := range queues {
			if q != "" {
				all = append(all, i)
			}
		}
		order, idx = order[:1], map[string][]int{order[0]: all}
	}
	err := parallel(ctx, order, func(ctx context.Context, q string) error {
		args := append(slices.Clone(head), len(idx[q]))
		for _, i := range idx[q] {
			args = append(args, item(i)...)
		}
		res, err := s.runQ(ctx, sc, q, args...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
		got, err := leaseErrs(res, len(idx[q]))
		if err != nil {
			return err
		}
		for j, i := range idx[q] {
			errs[i] = got[j]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

func leaseIDs(ls []store.Lease) []rdq.ID {
	ids := make([]rdq.ID, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids
}

// Heartbeat implements store.Store: one script per queue of the leases.
func (s *Store) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	qs, err := s.queuesOfLeased(ctx, leaseIDs(p.Leases), false)
	if err != nil {
		return nil, fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	errs, err := s.leaseBatch(ctx, scriptHeartbeat, qs, false, []any{nowArg(p.Now), micros(p.Extend)}, func(i int) []any {
		return []any{p.Leases[i].ID.String(), p.Leases[i].Token}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	return errs, nil
}

// Finish implements store.Store: one script per queue of the completions
// on Redis Cluster, one in all on one server.
func (s *Store) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	errs := make([]error, len(p.Completions))
	var sent []int
	var ids []rdq.ID
	for i, c := range p.Completions {
		if err := checkCompletion(c); err != nil {
			errs[i] = err
			continue
		}
		sent = append(sent, i)
		ids = append(ids, c.ID)
	}
	if len(sent) == 0 {
		return errs, nil
	}
	qs, err := s.queuesOfLeased(ctx, ids, true)
	if err != nil {
		return nil, fmt.Errorf("redisstore: finish: %w", err)
	}
	got, err := s.leaseBatch(ctx, scriptFinish, qs, true, []any{nowArg(p.Now)}, func(j int) []any {
		c := p.Completions[sent[j]]
		var a store.AttemptRecord
		if c.Attempt != nil {
			a = *c.Attempt
		}
		return []any{c.ID.String(), qs[j], c.Token, string(c.Status), micros(max(c.RetryIn, 0)), flag(c.Attempt != nil),
			string(a.Outcome), cut(a.Failure.Type), a.Failure.Message, a.Failure.Stack, cut(a.Failure.Fingerprint),
			a.WorkerID, micros(max(a.Duration, 0))}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: finish: %w", err)
	}
	for j, i := range sent {
		errs[i] = got[j]
	}
	return errs, nil
}

func checkCompletion(c store.Completion) error {
	switch c.Status {
	case rdq.StatusPending, rdq.StatusSucceeded, rdq.StatusDead:
	default:
		return fmt.Errorf("%w: completion of task %s has status %q; want %s, %s or %s", rdq.ErrInvalid, c.ID, c.Status, rdq.StatusPending, rdq.StatusSucceeded, rdq.StatusDead)
	}
	if a := c.Attempt; a != nil {
		switch a.Outcome {
		case rdq.OutcomeSuccess, rdq.OutcomeRetryableFailure, rdq.OutcomePermanentFailure:
		default:
			return fmt.Errorf("%w: completion of task %s records an attempt with outcome %q; want %s, %s or %s", rdq.ErrInvalid, c.ID, a.Outcome, rdq.OutcomeSuccess, rdq.OutcomeRetryableFailure, rdq.OutcomePermanentFailure)
		}
	}
	return nil
}

// Release implements store.Store: one script per queue of the leases.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	qs, err := s.queuesOfLeased(ctx, leaseIDs(p.Leases), true)
	if err != nil {
		return nil, fmt.Errorf("redisstore: release: %w", err)
	}
	errs, err := s.leaseBatch(ctx, scriptRelease, qs, false, []any{nowArg(p.Now)}, func(i int) []any {
		return []any{p.Leases[i].ID.String(), p.Leases[i].Token}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: release: %w", err)
	}
	return errs, nil
}

// ReclaimExpired implements store.Store. Over several queues (or every
// queue, with none named) it reads each queue's expired leases, merges
// them by expiry and takes over each queue's share of the Limit, one
// script per queue, as Claim does.
func (s *Store) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: reclaim needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	le := rdq.LeaseExpiredFailure()
	qs := slices.Compact(slices.Sorted(slices.Values(p.Queues)))
	if len(qs) == 0 {
		var err error
		if qs, err = s.allQueues(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: reclaim: %w", err)
		}
	}
	args := func(limit int, dry bool) []any {
		return []any{nowArg(p.Now), micros(p.Lease), p.WorkerID, limit, le.Type, le.Message, le.Fingerprint, flag(dry)}
	}
	quota := map[string]int{}
	switch len(qs) {
	case 0:
		return nil, nil
	case 1:
		quota[qs[0]] = p.Limit
	default:
		cands, err := s.peek(ctx, scriptReclaim, qs, func(string) []any { return args(p.Limit, true) })
		if err != nil {
			return nil, fmt.Errorf("redisstore: reclaim: %w", err)
		}
		for _, c := range cands[:min(p.Limit, len(cands))] {
			quota[c.q]++
		}
	}
	var mu sync.Mutex
	var out []*rdq.Task
	err := parallel(ctx, slices.Sorted(maps.Keys(quota)), func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptReclaim, q, args(quota[q], false)...)
		if err != nil {
			return err
		}
		tasks, err := decodeTasks(res)
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, tasks...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: reclaim: %w", err)
	}
	return out, nil
}

// Get implements store.Store: the index names the task's queue, whose
// script reads it. An index entry without its task reads as not found.
func (s *Store) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	qs, err := s.queuesOf(ctx, []rdq.ID{id})
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: get %s: %w", id, err)
	}
	if qs[0] == "" {
		return nil, nil, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	return s.getIn(ctx, qs[0], id)
}

// getIn reads task id of queue q.
func (s *Store) getIn(ctx context.Context, q string, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	res, err := s.runQ(ctx, scriptGet, q, id.String())
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: get %s: %w", id, err)
	}
	parts, _ := res.([]any)
	if len(parts) == 0 {
		return nil, nil, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	if len(parts) != 2 {
		return nil, nil, fmt.Errorf("redisstore: get %s: unexpected reply of %d parts", id, len(parts))
	}
	fields, _ := parts[0].([]any)
	t, err := decodeTask(fields)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: get %s: %w", id, err)
	}
	recs, _ := parts[1].([]any)
	atts := make([]rdq.Attempt, 0, len(recs))
	for _, r := range recs {
		a, err := decodeAttempt(id, str(r))
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: get %s: %w", id, err)
		}
		atts = append(atts, a)
	}
	return t, atts, nil
}

// PurgeSucceeded implements store.Store: one script per queue, in queue
// order, until Limit tasks were deleted; each queue that deletes any
// writes its part of one "retention" audit entry. Every queue's purged keys are
// pruned.
func (s *Store) PurgeSucceeded(ctx context.Context, p store.PurgeSucceededParams) (int64, error) {
	if p.Limit < 1 {
		return 0, fmt.Errorf("%w: redisstore: purge needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	if p.OlderThan < 0 {
		return 0, fmt.Errorf("%w: redisstore: purge succeeded with a negative retention (%s)", rdq.ErrInvalid, p.OlderThan)
	}
	filter, err := json.Marshal(map[string]string{"status": string(rdq.StatusSucceeded), "older_than": p.OlderThan.String()})
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge succeeded: %w", err)
	}
	qs, err := s.allQueues(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge succeeded: %w", err)
	}
	aid, err := s.reserveAudit(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge succeeded: %w", err)
	}
	var n int64
	for _, q := range qs {
		res, err := s.runQ(ctx, scriptPurgeSucceeded, q, nowArg(p.Now), micros(p.OlderThan), int64(p.Limit)-n, p.Actor, micros(s.keyRetention), string(filter), aid)
		if err != nil {
			return n, fmt.Errorf("redisstore: purge succeeded: queue %s: %w", q, err)
		}
		gone, _ := res.([]any)
		if err := s.unindex(ctx, gone); err != nil {
			return n, fmt.Errorf("redisstore: purge succeeded: %w", err)
		}
		n += int64(len(gone))
	}
	return n, nil
}

// unindex deletes the index entries of tasks a script deleted.
func (s *Store) unindex(ctx context.Context, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.idKey(str(id))
	}
	if err := s.pipeline(ctx, keys, func(p redis.Pipeliner, i int) { p.Del(ctx, keys[i]) }); err != nil {
		return fmt.Errorf("deleting the index entries of purged tasks: %w", err)
	}
	return nil
}

// Notifications implements store.Notifier with Redis pub/sub: every
// Enqueue publishes the names of the queues it inserted into.
func (s *Store) Notifications(ctx context.Context) (<-chan string, error) {
	ps := s.c.Subscribe(ctx, s.ns+":notify")
	if _, err := ps.Receive(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("redisstore: subscribing to notifications: %w", err), ps.Close())
	}
	in := ps.Channel()
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer func() {
			if err := ps.Close(); err != nil {
				s.log.WarnContext(context.WithoutCancel(ctx), "redisstore: closing the notification subscription", "err", err)
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- m.Payload:
				default: // hints may be dropped; polling is the source of truth
				}
			}
		}
	}()
	return out, nil
}

// leaseErrs turns a script's per-item 1/0 reply into nil/ErrLeaseLost.
func leaseErrs(res any, n int) ([]error, error) {
	vals, ok := res.([]any)
	if !ok || len(vals) != n {
		return nil, fmt.Errorf("redisstore: unexpected reply %T of %d items, want %d", res, len(vals), n)
	}
	errs := make([]error, n)
	for i, v := range vals {
		if v != int64(1) {
			errs[i] = store.ErrLeaseLost
		}
	}
	return errs, nil
}
