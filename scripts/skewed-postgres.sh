#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster whose clock runs ahead of (or
# behind) this machine's, by Debian's libfaketime preloaded into the server: for
# tests that prove a store follows its database's clock, not its client's.
#
#   skewed-postgres.sh start DIR PORT [OFFSET]   initdb in DIR/data, start on 127.0.0.1:PORT
#                                                with the clock moved by OFFSET (default +1h,
#                                                libfaketime's syntax: +1h, -30m, +2d)
#   skewed-postgres.sh stop DIR                  stop the cluster of DIR (fast shutdown)
#
# The cluster trusts loopback connections as postgres and keeps nothing: DIR is
# the caller's to delete. Run as root, the server runs as the postgres user.
# Exits 3 when PostgreSQL or libfaketime is not installed.
#
# Environment:
#   PG_VERSION    the PostgreSQL major version whose binaries to use (default 15)
#   FAKETIME_LIB  libfaketime's library (default: Debian's, for this machine's architecture)
set -euo pipefail

bin=/usr/lib/postgresql/${PG_VERSION:-15}/bin
lib=${FAKETIME_LIB:-$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1 || true)}
usage() { echo "usage: $0 start DIR PORT [OFFSET] | stop DIR" >&2; exit 2; }
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
case $cmd in
start)
	[ $# -ge 3 ] || usage
	port=$3 offset=${4:-+1h}
	if [ ! -x "$bin/initdb" ]; then
		echo "skewed-postgres.sh: no PostgreSQL binaries in $bin: apt-get install postgresql-${PG_VERSION:-15}" >&2
		exit 3
	fi
	if [ -z "$lib" ] || [ ! -f "$lib" ]; then
		echo "skewed-postgres.sh: no libfaketime at ${lib:-/usr/lib/*/faketime/libfaketime.so.1}: apt-get install libfaketime (or set FAKETIME_LIB)" >&2
		exit 3
	fi
	mkdir -p "$dir"
	if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi
	as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	as_owner env LD_PRELOAD="$lib" FAKETIME="$offset" FAKETIME_DONT_RESET=1 \
		"$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c max_connections=40" start >/dev/null ||
		{ cat "$dir/server.log" >&2; exit 1; }
	;;
stop)
	as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	;;
*)
	usage
	;;
esac
