package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"strconv"
	"strings"
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
}

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
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// New returns a store on an existing client (a *redis.Client on one
// server). The caller keeps the client: Close does not close it.
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
	kr := cfg.KeyRetention
	if kr == 0 {
		kr = DefaultKeyRetention
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Store{c: c, ns: ns, keyRetention: kr, log: log}, nil
}

// Open connects to the Redis server a URL names (redis://, or rediss://
// for TLS, as go-redis's ParseURL reads them) and returns a store on it,
// which Close closes.
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
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	c := redis.NewClient(opt)
	s, err := New(c, cfg)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	s.owned = true
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("redisstore: connecting to %s (%s): %w", opt.Addr, redactedDB(opt), err), c.Close())
	}
	problems, err := s.CheckDurability(ctx)
	if err != nil {
		if cfg.RequireDurable {
			return nil, errors.Join(fmt.Errorf("redisstore: %s: durability required, and %w", opt.Addr, err), c.Close())
		}
		s.log.WarnContext(ctx, "redisstore: could not check that the server keeps acknowledged tasks", "addr", opt.Addr, "err", err)
	}
	for _, p := range problems {
		if cfg.RequireDurable {
			return nil, errors.Join(fmt.Errorf("%w: redisstore: %s can lose acknowledged tasks: %s", ErrNotDurable, opt.Addr, strings.Join(problems, "; ")), c.Close())
		}
		s.log.WarnContext(ctx, "redisstore: the server can lose acknowledged tasks", "addr", opt.Addr, "problem", p)
	}
	return s, nil
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
func (s *Store) CheckDurability(ctx context.Context) ([]string, error) {
	cfg, err := s.c.ConfigGet(ctx, "*").Result()
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

// run runs a script with the store's namespace as its first argument.
func (s *Store) run(ctx context.Context, sc *redis.Script, args ...any) (any, error) {
	return sc.Run(ctx, s.c, nil, append([]any{s.ns}, args...)...).Result()
}

// Enqueue implements store.Store.
func (s *Store) Enqueue(ctx context.Context, p store.EnqueueParams) ([]store.EnqueueResult, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3+18*len(p.Tasks))
	args = append(args, nowArg(p.Now), micros(s.keyRetention), len(p.Tasks))
	for i, nt := range p.Tasks {
		if err := checkNew(nt); err != nil {
			return nil, fmt.Errorf("redisstore: task %d: %w", i, err)
		}
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
	res, err := s.run(ctx, scriptEnqueue, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: enqueue: %w", err)
	}
	rows, ok := res.([]any)
	if !ok || len(rows) != len(p.Tasks) {
		return nil, fmt.Errorf("redisstore: enqueue: unexpected reply %T", res)
	}
	out := make([]store.EnqueueResult, len(rows))
	for i, r := range rows {
		row, _ := r.([]any)
		if len(row) == 0 {
			return nil, fmt.Errorf("redisstore: enqueue: empty reply for task %d", i)
		}
		kind, _ := row[0].(string)
		switch kind {
		case "purged":
			if len(row) != 5 {
				return nil, fmt.Errorf("redisstore: enqueue: malformed purged reply for task %d", i)
			}
			id, err := rdq.ParseID(str(row[1]))
			if err != nil {
				return nil, fmt.Errorf("redisstore: enqueue: purged task's ID: %w", err)
			}
			out[i] = store.EnqueueResult{Duplicate: true, Purged: true, Task: &rdq.Task{
				ID: id, Queue: str(row[2]), IdempotencyKey: str(row[3]), CreatedAt: microTime(str(row[4])),
			}}
		case "new":
			if len(row) != 2 {
				return nil, fmt.Errorf("redisstore: enqueue: malformed reply for task %d", i)
			}
			out[i] = store.EnqueueResult{Task: inserted(p.Tasks[i], microTime(str(row[1])))}
		case "dup":
			t, err := decodeTask(row[1:])
			if err != nil {
				return nil, fmt.Errorf("redisstore: enqueue: task %d: %w", i, err)
			}
			out[i] = store.EnqueueResult{Task: t, Duplicate: true}
		default:
			return nil, fmt.Errorf("redisstore: enqueue: unexpected reply kind %q", kind)
		}
	}
	return out, nil
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

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) ([]*rdq.Task, error) {
	if len(p.Queues) == 0 || p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: claim needs at least one queue and a limit of at least 1 (got %d queues, limit %d)", rdq.ErrInvalid, len(p.Queues), p.Limit)
	}
	args := make([]any, 0, 6+len(p.Queues)+len(p.Handlers))
	args = append(args, nowArg(p.Now), micros(p.Lease), p.WorkerID, p.Limit, len(p.Queues))
	for _, q := range p.Queues {
		args = append(args, q)
	}
	args = append(args, len(p.Handlers))
	for _, h := range p.Handlers {
		args = append(args, h)
	}
	res, err := s.run(ctx, scriptClaim, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	tasks, err := decodeTasks(res)
	if err != nil {
		return nil, err
	}
	s.leased.add(tasks)
	return tasks, nil
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3+2*len(p.Leases))
	args = append(args, nowArg(p.Now), micros(p.Extend), len(p.Leases))
	for _, l := range p.Leases {
		args = append(args, l.ID.String(), l.Token)
	}
	res, err := s.run(ctx, scriptHeartbeat, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	return leaseErrs(res, len(p.Leases))
}

// Finish implements store.Store.
func (s *Store) Finish(ctx context.Context, p store.FinishParams) ([]error, error) {
	errs := make([]error, len(p.Completions))
	args := make([]any, 0, 2+13*len(p.Completions))
	args = append(args, nowArg(p.Now), 0)
	var sent []int
	for i, c := range p.Completions {
		if err := checkCompletion(c); err != nil {
			errs[i] = err
			continue
		}
		var a store.AttemptRecord
		if c.Attempt != nil {
			a = *c.Attempt
		}
		sent = append(sent, i)
		args = append(args, c.ID.String(), s.leased.take(c.ID), c.Token, string(c.Status), micros(max(c.RetryIn, 0)), flag(c.Attempt != nil),
			string(a.Outcome), cut(a.Failure.Type), a.Failure.Message, a.Failure.Stack, cut(a.Failure.Fingerprint),
			a.WorkerID, micros(max(a.Duration, 0)))
	}
	if len(sent) == 0 {
		return errs, nil
	}
	args[1] = len(sent)
	res, err := s.run(ctx, scriptFinish, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: finish: %w", err)
	}
	got, err := leaseErrs(res, len(sent))
	if err != nil {
		return nil, err
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

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+2*len(p.Leases))
	args = append(args, nowArg(p.Now), len(p.Leases))
	for _, l := range p.Leases {
		s.leased.take(l.ID)
		args = append(args, l.ID.String(), l.Token)
	}
	res, err := s.run(ctx, scriptRelease, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: release: %w", err)
	}
	return leaseErrs(res, len(p.Leases))
}

// ReclaimExpired implements store.Store.
func (s *Store) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]*rdq.Task, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: redisstore: reclaim needs a limit of at least 1 (got %d)", rdq.ErrInvalid, p.Limit)
	}
	le := rdq.LeaseExpiredFailure()
	args := make([]any, 0, 8+len(p.Queues))
	args = append(args, nowArg(p.Now), micros(p.Lease), p.WorkerID, p.Limit, le.Type, le.Message, le.Fingerprint, len(p.Queues))
	for _, q := range p.Queues {
		args = append(args, q)
	}
	res, err := s.run(ctx, scriptReclaim, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: reclaim: %w", err)
	}
	return decodeTasks(res)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id rdq.ID) (*rdq.Task, []rdq.Attempt, error) {
	res, err := s.run(ctx, scriptGet, id.String())
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

// PurgeSucceeded implements store.Store.
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
	res, err := s.run(ctx, scriptPurgeSucceeded, nowArg(p.Now), micros(p.OlderThan), p.Limit, p.Actor, micros(s.keyRetention), string(filter))
	if err != nil {
		return 0, fmt.Errorf("redisstore: purge succeeded: %w", err)
	}
	n, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("redisstore: purge succeeded: unexpected reply %T", res)
	}
	return n, nil
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
