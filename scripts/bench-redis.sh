#!/usr/bin/env bash
# rdq on Redis side by side with Asynq (github.com/hibiken/asynq) on the same
# Redis server, and rdq on PostgreSQL in the same minutes, with the protocol of
# the PostgreSQL peer bench: insert N tasks in batches of 5,000, then one
# worker with 2,000 slots drains them (fail-once: every task fails its first
# attempt and is retried at once); the engines run in interleaved rounds.
#
#   bash scripts/bench-redis.sh                 # from the project's root
#   N=50000 ROUNDS=5 bash scripts/bench-redis.sh
#   BASE=main bash scripts/bench-redis.sh      # rdq of BASE as a series too
#
# Env: REDIS_URL (default redis://127.0.0.1:6390/15: a database the bench
# empties before each run), RDQ_DATABASE_URL (PostgreSQL for the pg series;
# unset skips it), N (default 100000), ROUNDS (default 3), BASE (a git
# revision: its harness and store run as the series rdq-base, interleaved
# with the others, to compare a change with what it changes).
# Prints one line per run and the median drain rate of each series with the
# ratios. The harness is redisstore/internal/peerbench, a module of its own.
# With STATS=1 each run's line also has the Redis server's CPU time per task
# (INFO cpu) and commands per task (INFO commandstats, counted inside
# scripts and out), read around the run after CONFIG RESETSTAT, and their
# medians are printed: figures that do not depend on the machine's load,
# but only on a server no one else uses during the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6390/15}
N=${N:-100000}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd redisstore/internal/peerbench && GOWORK=off go build -o "$tmp/peerbench" .)
engines=(asynq rdq)
if [ -n "${BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$BASE" | tar -x -C "$tmp/base"
	(cd "$tmp/base/redisstore/internal/peerbench" && GOWORK=off go build -o "$tmp/peerbench-base" .)
	engines+=(rdq-base)
fi
[ -n "${RDQ_DATABASE_URL:-}" ] && engines+=(pg)
# server_cpu prints the server's CPU seconds; server_calls the commands it
# ran since the last CONFIG RESETSTAT.
server_cpu() { redis-cli -u "$REDIS_URL" info cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { print s }'; }
server_calls() { redis-cli -u "$REDIS_URL" info commandstats | sed -n 's/^cmdstat_[^:]*:calls=\([0-9]*\),.*/\1/p' | paste -sd+ | bc; }
: >"$tmp/results"
for _ in $(seq 1 "$ROUNDS"); do
	for mode in noop fail-once; do
		flag=; [ "$mode" = fail-once ] && flag=-fail-once
		for e in "${engines[@]}"; do
			bin=$tmp/peerbench engine=$e
			[ "$e" = rdq-base ] && bin=$tmp/peerbench-base engine=rdq
			if [ -n "${STATS:-}" ] && [ "$e" != pg ]; then
				redis-cli -u "$REDIS_URL" config resetstat >/dev/null
				c0=$(server_cpu)
			fi
			line=$("$bin" -engine "$engine" -redis-url "$REDIS_URL" -database-url "${RDQ_DATABASE_URL:-}" -n "$N" $flag)
			if [ -n "${STATS:-}" ] && [ "$e" != pg ]; then
				calls=$(server_calls) c1=$(server_cpu)
				line="$line $(python3 -c 'import sys; c0, c1, calls, n = map(float, sys.argv[1:]); print(f"cpu_us_per_task={(c1 - c0) * 1e6 / n:.1f} commands_per_task={calls / n:.2f}")' "$c0" "$c1" "$calls" "$N")"
			fi
			echo "$e $mode ${line#* }" | tee -a "$tmp/results"
		done
	done
done
python3 - "$tmp/results" "${engines[@]}" <<'PY'
import re, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = sys.argv[2:]
def med(name, mode):
    v = [float(re.search(r"work_per_s=([0-9.]+)", " ".join(r)).group(1)) for r in rows if r[0] == name and r[1] == mode]
    return statistics.median(v) if v else float("nan")
for mode in ("noop", "fail-once"):
    m = {n: med(n, mode) for n in names}
    parts = [f"{n} {m[n]:,.0f}/s" for n in names]
    ratios = f"; rdq/asynq {m['rdq'] / m['asynq']:.2f}x"
    if "rdq-base" in m:
        ratios += f", rdq-base/asynq {m['rdq-base'] / m['asynq']:.2f}x, rdq/rdq-base {m['rdq'] / m['rdq-base']:.2f}x"
    print(f"median {mode:9} " + ", ".join(parts) + ratios)
    for stat in ("cpu_us_per_task", "commands_per_task"):
        v = {}
        for n in names:
            xs = [float(m.group(1)) for r in rows if r[0] == n and r[1] == mode
                  for m in [re.search(stat + r"=([0-9.]+)", " ".join(r))] if m]
            if xs:
                v[n] = statistics.median(xs)
        if v:
            print(f"median {mode:9} {stat}: " + ", ".join(f"{n} {x:.1f}" for n, x in v.items()))
PY
