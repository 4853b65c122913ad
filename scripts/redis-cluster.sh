#!/usr/bin/env bash
# A throw-away Redis Cluster on loopback for gyro's Redis tests: three
# masters with one replica each (six redis-server processes), in a scratch
# directory.
#
#   scripts/redis-cluster.sh start    start it (or find it running); prints
#                                     the seed nodes, one redis:// URL a line
#   scripts/redis-cluster.sh stop     stop every node and remove the directory
#   scripts/redis-cluster.sh status   exit 0 when it is up and healthy
#
# Environment:
#   GYRO_REDIS_DIR        scratch directory (default ${TMPDIR:-/tmp}/gyro-redis-cluster)
#   GYRO_REDIS_PORT       first port (default 7380; the six nodes use
#                         PORT..PORT+5, and their cluster bus PORT+10000..)
#
# When redis-server is missing, `start` installs the Debian package
# `redis-server` (which brings redis-cli) with apt-get, as root or through
# sudo. The package's own service is not used: every node here runs as a
# daemon from its own configuration in the scratch directory, bound to
# 127.0.0.1 only, with an append-only file synced every second (Redis's
# usual production setting). `start` is idempotent: a healthy cluster
# already running is reused; anything else in the directory is stopped and
# replaced by a fresh cluster.
set -euo pipefail

dir="${GYRO_REDIS_DIR:-${TMPDIR:-/tmp}/gyro-redis-cluster}"
base="${GYRO_REDIS_PORT:-7380}"
nodes=6
ports=()
for ((i = 0; i < nodes; i++)); do ports+=($((base + i))); done

say() { printf 'redis-cluster: %s\n' "$*" >&2; }

install_redis() {
    command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "redis-server not found: installing the Debian package redis-server with apt-get"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # Debian's policy-rc.d (where present) keeps the packaged service from
    # starting; it is not needed either way.
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
    command -v redis-server >/dev/null 2>&1
}

cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

healthy() {
    local p
    for p in "${ports[@]}"; do
        cli "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
    done
    # Three masters, each with its replica connected and in sync.
    [ "$(cli "${ports[0]}" cluster nodes 2>/dev/null | grep -c master)" -eq 3 ] || return 1
    [ "$(cli "${ports[0]}" cluster nodes 2>/dev/null | grep -c slave)" -eq 3 ] || return 1
    local up=0
    for p in "${ports[@]}"; do
        cli "$p" info replication 2>/dev/null | grep -q '^master_link_status:up' && up=$((up + 1))
    done
    [ "$up" -eq 3 ]
}

print_seeds() {
    local p
    for p in "${ports[@]}"; do echo "redis://127.0.0.1:$p"; done
}

# The data is scratch: the nodes are killed outright (a clean SHUTDOWN
# takes a second or two per node, syncing files about to be deleted).
stop_nodes() {
    local p pid
    for p in "${ports[@]}"; do
        pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    for p in "${ports[@]}"; do
        pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
        for _ in $(seq 50); do
            [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
    done
}

start() {
    install_redis || { say "cannot install redis-server"; exit 3; }
    if healthy; then
        say "already running in $dir"
        print_seeds
        return 0
    fi
    stop_nodes
    rm -rf "$dir"
    local p
    for p in "${ports[@]}"; do
        if cli "$p" ping >/dev/null 2>&1; then
            say "port $p is taken by a Redis this script did not start; set GYRO_REDIS_PORT"
            exit 4
        fi
        mkdir -p "$dir/$p"
        cat >"$dir/$p/redis.conf" <<EOF
bind 127.0.0.1
port $p
dir $dir/$p
daemonize yes
pidfile $dir/$p/redis.pid
logfile $dir/$p/redis.log
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 2000
cluster-replica-validity-factor 0
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
repl-diskless-sync-delay 0
EOF
        redis-server "$dir/$p/redis.conf"
    done
    for p in "${ports[@]}"; do
        for _ in $(seq 100); do cli "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
    done
    local addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 || {
        cat "$dir/create.log" >&2
        say "cluster create failed"
        exit 5
    }
    for _ in $(seq 200); do healthy && break; sleep 0.1; done
    healthy || { say "cluster did not become healthy (logs in $dir/*/redis.log)"; exit 6; }
    say "three masters and three replicas on 127.0.0.1:${ports[0]}-${ports[-1]} ($dir)"
    print_seeds
}

case "${1:-}" in
    start) start ;;
    stop)
        stop_nodes
        rm -rf "$dir"
        ;;
    status) healthy ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
