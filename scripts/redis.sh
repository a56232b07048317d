#!/usr/bin/env bash
# Makes the Redis the test suite uses available on this machine:
#   - installs redis-server from Debian's packages when it is absent,
#   - starts a server of its own on loopback, on a fixed port, with its own
#     configuration and data directory, when none answers there.
# Safe to run any number of times. Needs root (or sudo) for the install.
#
# The server persists as rdq recommends (see redisstore's package
# documentation): an append-only file, and no eviction.
#
# Environment:
#   RDQ_TEST_REDIS_URL  the URL the tests use (default redis://127.0.0.1:6390/0);
#                       only its port is read here.
#   RDQ_REDIS_DIR       the server's directory: configuration, data, log
#                       (default /var/lib/rdq-test-redis).
set -euo pipefail

url=${RDQ_TEST_REDIS_URL:-redis://127.0.0.1:6390/0}
hostport=${url#*://}
hostport=${hostport%%/*}
hostport=${hostport##*@}
port=${hostport##*:}
dir=${RDQ_REDIS_DIR:-/var/lib/rdq-test-redis}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
log() { printf 'redis.sh: %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	log "installing redis-server from Debian's packages"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
	log "ready: $url (already running)"
	exit 0
fi

as_root mkdir -p "$dir"
conf=$dir/redis.conf
tmp=$(mktemp)
cat >"$tmp" <<CONF
# The test suite's Redis (scripts/redis.sh).
bind 127.0.0.1
port $port
protected-mode yes
daemonize yes
dir $dir
pidfile $dir/redis.pid
logfile $dir/redis.log
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
maxclients 2000
CONF
as_root cp "$tmp" "$conf"
rm -f "$tmp"

log "starting redis-server on 127.0.0.1:$port ($dir)"
as_root redis-server "$conf"
for _ in $(seq 1 100); do
	redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break
	sleep 0.1
done
redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG || { log "Redis did not come up on 127.0.0.1:$port; see $dir/redis.log"; exit 1; }
log "ready: $url"
