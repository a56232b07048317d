#!/usr/bin/env bash
# Makes the Redis Cluster the test suite uses available on this machine:
#   - installs redis-server from Debian's packages when it is absent,
#   - starts six servers of its own on loopback (ports 7101 to 7106), each
#     with its own configuration and data directory, when none answers there,
#   - forms a cluster of 3 masters with a replica each when they are not
#     one yet,
# and prints the seed list (RDQ_TEST_REDIS_CLUSTER). Safe to run any number
# of times. Needs root (or sudo) for the install.
#
# Every node persists as rdq recommends (see redisstore's package
# documentation): an append-only file, and no eviction. A master that stops
# answering for cluster-node-timeout (2 s) is replaced by its replica.
#
# Environment:
#   RDQ_REDIS_CLUSTER_DIR  the nodes' parent directory (default
#                          /var/lib/rdq-test-redis-cluster): one directory
#                          per port, with configuration, data and log.
#   RDQ_REDIS_CLUSTER_PORTS  the six ports (default "7101 7102 7103 7104 7105 7106").
set -euo pipefail

dir=${RDQ_REDIS_CLUSTER_DIR:-/var/lib/rdq-test-redis-cluster}
read -r -a ports <<<"${RDQ_REDIS_CLUSTER_PORTS:-7101 7102 7103 7104 7105 7106}"
[ "${#ports[@]}" -eq 6 ] || { echo "redis-cluster.sh: RDQ_REDIS_CLUSTER_PORTS names ${#ports[@]} ports; want 6" >&2; exit 1; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
log() { printf 'redis-cluster.sh: %s\n' "$*" >&2; }
up() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	log "installing redis-server from Debian's packages"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

for port in "${ports[@]}"; do
	up "$port" && continue
	d=$dir/$port
	as_root mkdir -p "$d"
	tmp=$(mktemp)
	cat >"$tmp" <<CONF
# A node of the test suite's Redis Cluster (scripts/redis-cluster.sh).
bind 127.0.0.1
port $port
protected-mode yes
daemonize yes
dir $d
pidfile $d/redis.pid
logfile $d/redis.log
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
maxclients 2000
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 2000
CONF
	as_root cp "$tmp" "$d/redis.conf"
	rm -f "$tmp"
	log "starting redis-server on 127.0.0.1:$port ($d)"
	as_root redis-server "$d/redis.conf"
done
for port in "${ports[@]}"; do
	for _ in $(seq 1 100); do
		up "$port" && break
		sleep 0.1
	done
	up "$port" || { log "Redis did not come up on 127.0.0.1:$port; see $dir/$port/redis.log"; exit 1; }
done

seeds=""
for port in "${ports[@]}"; do seeds="$seeds${seeds:+,}127.0.0.1:$port"; done

if ! redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | grep -q '^cluster_state:ok'; then
	known=$(redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')
	if [ "${known:-1}" -le 1 ]; then
		log "forming the cluster: 3 masters, a replica each"
		addrs=()
		for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
	fi
	for _ in $(seq 1 300); do
		redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | grep -q '^cluster_state:ok' && break
		sleep 0.1
	done
	redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info | grep -q '^cluster_state:ok' ||
		{ log "the cluster did not reach state ok; see $dir/*/redis.log"; exit 1; }
fi
log "ready: RDQ_TEST_REDIS_CLUSTER=$seeds"
echo "$seeds"
