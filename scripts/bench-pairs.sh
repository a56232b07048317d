#!/usr/bin/env bash
# Compares the end-to-end throughput of two revisions of rdq on PostgreSQL, in
# pairs: for each pair, the old build then the new one, each into a fresh
# database (rdq migrate, then rdq bench's noop and fail-once workloads). On a
# machine whose speed drifts from minute to minute, runs taken side by side
# are what can be compared; the last lines are the means over the pairs.
#
# Usage: scripts/bench-pairs.sh OLD_REV [NEW_REV] [PAIRS]
#   OLD_REV, NEW_REV  git revisions (NEW_REV defaults to the working tree)
#   PAIRS             how many pairs (default 6)
# Environment:
#   RDQ_BENCH_ADMIN_URL  a database to create the scratch databases from
#                        (default postgres://postgres@127.0.0.1:5432/postgres)
#   RDQ_BENCH_TASKS      tasks per workload (default 50000)
# Drops and creates the database rdq_bench_pairs: use a scratch server.
set -euo pipefail

old=${1:?usage: scripts/bench-pairs.sh OLD_REV [NEW_REV] [PAIRS]}
new=${2:-}
pairs=${3:-6}
admin=${RDQ_BENCH_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
tasks=${RDQ_BENCH_TASKS:-50000}
db=rdq_bench_pairs
url=${admin%/*}/$db

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # build REV OUT: builds cmd/rdq at REV (the working tree when REV is empty)
	if [ -z "$1" ]; then
		(cd "$root" && go build -o "$2" ./cmd/rdq)
		return
	fi
	rm -rf "$work/old"
	git -C "$root" worktree add --detach "$work/old" "$1" >/dev/null 2>&1
	(cd "$work/old" && go build -o "$2" ./cmd/rdq)
	git -C "$root" worktree remove --force "$work/old" >/dev/null
}
build "$old" "$work/rdq-old"
build "$new" "$work/rdq-new"

run() { # run BIN: prints "noop RATE fail-once RATE"
	PGOPTIONS="-c client_min_messages=warning" psql -q "$admin" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	RDQ_DATABASE_URL=$url "$1" migrate >/dev/null 2>"$work/migrate.err" || { cat "$work/migrate.err" >&2; exit 1; }
	local out=""
	for w in noop fail-once; do
		rate=$(RDQ_DATABASE_URL=$url "$1" bench --ceiling 0 --workloads "$w" --tasks "$tasks" 2>/dev/null |
			awk -v w="$w" '$1 == w { gsub(",", "", $2); print $2 }')
		out="$out $w ${rate:-?}"
	done
	echo "${out# }"
}

results=()
for i in $(seq 1 "$pairs"); do
	o=$(run "$work/rdq-old")
	n=$(run "$work/rdq-new")
	printf 'pair %d  old: %s  new: %s\n' "$i" "$o" "$n"
	results+=("$o|$n")
done
psql -q "$admin" -c "DROP DATABASE IF EXISTS $db" >/dev/null

printf '%s\n' "${results[@]}" | awk -F'|' '
	{ split($1, o, " "); split($2, n, " ")
	  on += o[2]; of += o[4]; nn += n[2]; nf += n[4]; k++
	  if (n[2] > o[2]) wn++; if (n[4] > o[4]) wf++ }
	END {
	  printf "means over %d pairs: noop %.0f -> %.0f tasks/s (%+.0f%%, new faster in %d), fail-once %.0f -> %.0f tasks/s (%+.0f%%, new faster in %d)\n",
	    k, on/k, nn/k, 100*(nn/on-1), wn, of/k, nf/k, 100*(nf/of-1), wf
	  printf "fail-once as a share of noop: old %.0f%%, new %.0f%%\n", 100*of/on, 100*nf/nn
	}'
