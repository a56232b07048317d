#!/usr/bin/env bash
# Makes the PostgreSQL the test suite uses available on this machine:
#   - installs PostgreSQL 15 from Debian's packages when it is absent,
#   - lets the test role connect over TCP on 127.0.0.1 without a password,
#   - starts the cluster when it is down,
#   - creates the test database when it does not exist.
# Safe to run any number of times. Needs root (or sudo) for the first three steps.
#
# Environment:
#   RDQ_TEST_DATABASE_URL  the URL the tests use (default postgres://postgres@127.0.0.1:5432/test);
#                          only its database name is read here.
#   PG_VERSION             the major version to install (default 15).
set -euo pipefail

ver=${PG_VERSION:-15}
url=${RDQ_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
db=${url##*/}
db=${db%%\?*}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
log() { printf 'postgres.sh: %s\n' "$*" >&2; }

if [ ! -x "/usr/lib/postgresql/$ver/bin/postgres" ]; then
	log "installing PostgreSQL $ver from Debian's packages"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$ver" "postgresql-client-$ver" postgresql-contrib >/dev/null
fi

if [ ! -d "/etc/postgresql/$ver/main" ]; then
	log "creating cluster $ver/main"
	as_root pg_createcluster "$ver" main >/dev/null
fi

conf=/etc/postgresql/$ver/main
hba=$conf/pg_hba.conf
# The test role connects over loopback TCP without a password. Nothing but this
# machine can reach 127.0.0.1, and the rule goes first so it wins over scram.
if ! grep -q '^# rdq-test' "$hba"; then
	log "allowing passwordless loopback connections in $hba"
	tmp=$(mktemp)
	{
		echo '# rdq-test: the test suite connects over loopback without a password'
		echo 'host    all             all             127.0.0.1/32            trust'
		echo 'host    all             all             ::1/128                 trust'
		cat "$hba"
	} >"$tmp"
	as_root cp "$tmp" "$hba"
	rm -f "$tmp"
	restart=1
fi
# A test suite with many parallel packages needs more than the default 100 connections.
if [ ! -f "$conf/conf.d/rdq-test.conf" ]; then
	as_root mkdir -p "$conf/conf.d"
	printf 'max_connections = 300\nlisten_addresses = '\''127.0.0.1'\''\n' | as_root tee "$conf/conf.d/rdq-test.conf" >/dev/null
	restart=1
fi

if pg_lsclusters -h 2>/dev/null | awk -v v="$ver" '$1==v && $2=="main" {print $4}' | grep -q online; then
	if [ "${restart:-0}" = 1 ]; then
		log "restarting cluster to apply configuration"
		as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main restart
	fi
else
	log "starting cluster $ver/main"
	as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start
fi

for _ in $(seq 1 60); do
	pg_isready -q -h 127.0.0.1 -p 5432 && break
	sleep 0.5
done
pg_isready -h 127.0.0.1 -p 5432 >/dev/null || { log "PostgreSQL did not come up on 127.0.0.1:5432"; exit 1; }

if ! psql -qtA -h 127.0.0.1 -U postgres -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
	log "creating database $db"
	psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE \"$db\""
fi
log "ready: $url"
