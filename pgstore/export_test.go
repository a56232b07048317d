package pgstore

import (
	"github.com/srjn45/rdq"
	"time"

	"github.com/srjn45/rdq/store"
)

// ClaimQuery returns the claim statement for queues and its arguments, for
// EXPLAIN: the one-queue statement for one queue, as Claim picks it.
func ClaimQuery(s *Store, queues []string, limit int) (string, []any) {
	if len(queues) == 1 {
		return s.q.claimQueue, []any{queues[0], limit, micros(time.Minute), nil, "explain", nil}
	}
	return s.q.claim, []any{queues, limit, micros(time.Minute), nil, "explain"}
}

// ClaimHandlersQuery returns the claim statement for queues and handlers
// and its arguments, as Claim picks it.
func ClaimHandlersQuery(s *Store, queues, handlers []string, limit int) (string, []any) {
	if len(queues) == 1 {
		return s.q.claimQueueHandlers, []any{queues[0], limit, micros(time.Minute), nil, "explain", handlers, nil}
	}
	return s.q.claimHandlers, []any{queues, limit, micros(time.Minute), nil, "explain", handlers}
}

// ClaimFromQuery returns the claim statement for one queue (and handlers,
// if any) that starts at the floor from, and its arguments.
func ClaimFromQuery(s *Store, queue string, handlers []string, limit int, from time.Time) (string, []any) {
	if len(handlers) > 0 {
		return s.q.claimQueueHandlers, []any{queue, limit, micros(time.Minute), nil, "explain", handlers, from}
	}
	return s.q.claimQueue, []any{queue, limit, micros(time.Minute), nil, "explain", from}
}

// ClaimFloorFor is claimFloorFor.
const ClaimFloorFor = claimFloorFor

// SetClaimFloorClock replaces the clock that times s's claims from the
// front of a queue.
func SetClaimFloorClock(s *Store, now func() time.Time) { s.floors.now = now }

// ListDeadQuery returns the ListDead statement for p and its arguments.
func ListDeadQuery(s *Store, p store.ListDeadParams) (string, []any) {
	return s.listDeadQuery(p)
}

// ReclaimQuery returns the reclaim statement and its arguments.
func ReclaimQuery(s *Store, limit int) (string, []any) {
	return s.q.reclaimExpired, []any{[]string{}, limit, micros(time.Minute), "explain", nil, "t", "m", "f"}
}

// RedriveDeadQuery returns the RedriveDead statement for p and its arguments.
func RedriveDeadQuery(s *Store, p store.RedriveDeadParams) (string, []any) {
	q, args, err := s.redriveDeadQuery(p)
	if err != nil {
		panic(err)
	}
	return q, args
}

// PurgeDeadQuery returns the PurgeDead statement for p and its arguments.
func PurgeDeadQuery(s *Store, p store.PurgeDeadParams) (string, []any) {
	q, args, err := s.purgeDeadQuery(p)
	if err != nil {
		panic(err)
	}
	return q, args
}

// sampleLeases returns n leases on IDs that do not exist, for EXPLAIN.
func sampleLeases(n int) ([][16]byte, []int64) {
	ids := make([][16]byte, n)
	tokens := make([]int64, n)
	for i := range ids {
		ids[i] = rdq.NewID()
		tokens[i] = 1
	}
	return ids, tokens
}

// FinishQuery returns the Finish statement with arguments for n
// completions, each with a failed attempt.
func FinishQuery(s *Store, n int) (string, []any) {
	ids, tokens := sampleLeases(n)
	statuses := make([]string, n)
	retries := make([]int64, n)
	text := make([]*string, n)
	durations := make([]int64, n)
	v := "RETRYABLE_FAILURE"
	for i := range statuses {
		statuses[i] = "PENDING"
		text[i] = &v
	}
	return s.q.finish, []any{ids, tokens, statuses, retries, text, text, text, text, text, text, durations, nil, s.channel}
}

// RetryInPlaceQuery returns the RetryInPlace statement with arguments for n
// retries.
func RetryInPlaceQuery(s *Store, n int) (string, []any) {
	ids, tokens := sampleLeases(n)
	retries := make([]int64, n)
	text := make([]string, n)
	durations := make([]int64, n)
	return s.q.retryInPlace, []any{ids, tokens, retries, text, text, text, text, text, durations, nil, micros(time.Minute), s.channel}
}

// HeartbeatQuery returns the Heartbeat statement with arguments for n leases.
func HeartbeatQuery(s *Store, n int) (string, []any) {
	ids, tokens := sampleLeases(n)
	return s.q.heartbeat, []any{ids, tokens, micros(time.Minute), nil}
}

// ReleaseQuery returns the Release statement with arguments for n leases.
func ReleaseQuery(s *Store, n int) (string, []any) {
	ids, tokens := sampleLeases(n)
	return s.q.release, []any{ids, tokens, nil, s.channel}
}

// PurgeSucceededQuery returns the PurgeSucceeded statement and arguments.
func PurgeSucceededQuery(s *Store, limit int) (string, []any) {
	return s.q.purgeSucceeded, []any{micros(time.Hour), limit, nil, "explain", "{}"}
}

// DeadGroupsQuery returns the DeadGroups statement for f and its arguments.
func DeadGroupsQuery(s *Store, f store.DeadFilter) (string, []any) {
	return s.deadGroupsQuery(f)
}

// CountDeadQuery returns the CountDead statement for f and its arguments.
func CountDeadQuery(s *Store, f store.DeadFilter) (string, []any) {
	return s.countDeadQuery(f)
}

// StatsQuery returns the Stats statement and its arguments.
func StatsQuery(s *Store) (string, []any) {
	return s.q.stats, []any{nil, micros(time.Hour)}
}

// ListTasksQuery returns the ListTasks statement for p and its arguments.
func ListTasksQuery(s *Store, p store.ListTasksParams) (string, []any) {
	q, args, err := s.listTasksQuery(p)
	if err != nil {
		panic(err)
	}
	return q, args
}

// TaskByKeyQuery returns the TaskByKey statement and its arguments.
func TaskByKeyQuery(s *Store) (string, []any) {
	return s.q.taskByKey, []any{"q3", "k"}
}

// KeyQueries returns the idempotency-key statements with arguments.
func KeyQueries(s *Store) (lookup string, lookupArgs []any, prune string, pruneArgs []any) {
	return s.q.keyLookup, []any{[]string{"q3"}, []string{"k1"}},
		s.q.pruneKeys, []any{micros(time.Hour), 100, nil}
}

// ClaimProbeQuery returns the ClaimProbe statement and its arguments.
func ClaimProbeQuery(s *Store, queues []string) (string, []any) {
	return s.q.claimProbe, []any{queues, micros(time.Minute), nil, "explain", []string{"h1"}}
}

// MigrationCount is how many migrations are embedded.
func MigrationCount() int {
	ms, err := loadMigrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// EnqueueQuery returns the Enqueue statement with arguments for n new
// tasks of queue, none with a key or a first failure.
func EnqueueQuery(s *Store, queue string, n int) (string, []any) {
	ids, _ := sampleLeases(n)
	queues, handlers, types, headers := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads := make([][]byte, n)
	keys, outcomes := make([]*string, n), make([]*string, n)
	delays := make([]int64, n)
	maxAttempts := make([]int32, n)
	for i := range n {
		queues[i], handlers[i], headers[i], payloads[i] = queue, "h1", "{}", []byte{0}
	}
	return s.q.enqueue, []any{ids, queues, handlers, payloads, types, headers, keys, delays,
		outcomes, outcomes, outcomes, outcomes, outcomes, outcomes, delays, nil, s.channel, micros(s.keyRetention),
		maxAttempts, delays}
}

// HoldStraysQuery returns the statement ClaimProbe runs first, with its
// arguments.
func HoldStraysQuery(s *Store, queues []string) (string, []any) {
	return s.q.holdStrays, []any{queues, nil}
}

// SeriesRollupStep is how many minutes one Series call rolls up at most.
const SeriesRollupStep = seriesRollupStep

// SeriesLockKey returns the advisory lock key of s's series rollups.
func SeriesLockKey(s *Store) int64 { return seriesLockKey(s.schema) }

// SeriesStatement is one of the statements of a Series call, with its
// arguments.
type SeriesStatement struct {
	Name string
	SQL  string
	Args []any
}

// SeriesStatements returns the statements of a Series call of p at now
// with nothing rolled up, with the arguments Series passes them.
func SeriesStatements(s *Store, p store.SeriesParams, now time.Time) []SeriesStatement {
	pl := store.PlanSeries(p, now)
	history := pl.Rolled.Add(-seriesHistoryMinutes * time.Minute)
	if history.Before(pl.MinutesFrom) {
		history = pl.MinutesFrom
	}
	var notDone []time.Time
	for h := pl.HoursFrom; h.Before(pl.HoursTo); h = h.Add(time.Hour) {
		notDone = append(notDone, h)
	}
	return []SeriesStatement{
		{"pending", s.q.seriesPending, []any{pl.MinutesFrom, pl.Rolled, history, pl.HoursFrom, pl.HoursTo}},
		{"rollup", s.q.seriesRollup, []any{pl.MinutesFrom, pl.Rolled, pl.Keep, seriesRollupStep}},
		{"rollup hours", s.q.seriesRollupHours, []any{pl.HoursFrom, pl.HoursTo, pl.Keep}},
		{"read", s.q.series, []any{pl.Start, pl.HoursFrom, pl.HoursTo, pl.Rolled, pl.End,
			p.Width.Seconds(), p.Queue, p.Handler, history, notDone}},
	}
}
