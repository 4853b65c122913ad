#!/usr/bin/env bash
# Instructions the server spends per answer, counted by valgrind (callgrind),
# which a shared machine does not disturb the way it disturbs timings.
#
#   scripts/answer-instructions.sh [GYRO] [DURABILITY] [N1] [N2]
#
# Runs `GYRO serve --workers 1` under callgrind twice, with durability
# DURABILITY (none, async or sync; default none), driven by `gyro load -c 1`
# (data scenario, closed loop) with N1 and then N2 requests (default 10000
# and 30000), and prints (Ir(N2) - Ir(N1)) / (N2 - N1): the instructions
# of one more answer, start-up and shutdown cancelled out. Under valgrind
# the server is the bottleneck, so reads are full and batches large: this
# is the per-answer cost of a busy server. GYRO defaults to
# target/release/gyro (build it with `cargo build --release -p gyro`); the
# same binary drives the load.
set -euo pipefail
cd "$(dirname "$0")/.."
gyro="${1:-target/release/gyro}"
durability="${2:-none}"
n1="${3:-10000}"
n2="${4:-30000}"
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
[ -x "$gyro" ] || { echo "$gyro: no such binary" >&2; exit 1; }
gyro=$(realpath "$gyro")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. scripts/callgrind-serve.sh

# Total instructions of a server that answered $1 requests.
run() {
    local n=$1 dir="$work/$1" port=$((20000 + RANDOM % 20000))
    mkdir -p "$dir"
    printf '[storage]\ndurability = "%s"\n[admin]\nlisten = "127.0.0.1:%d"\n' \
        "$durability" $((port + 1)) >"$dir/gyro.toml"
    callgrind_serve "$dir" "$port" warn
    "$gyro" load --target "127.0.0.1:$port" -c 1 --threads 1 -n "$n" --timeout 60s \
        --quiet --json >"$dir/load.json" || true
    callgrind_stop
    grep -q '"errors": *0' "$dir/load.json" || { echo "load errors: $(cat "$dir/load.json")" >&2; exit 1; }
    callgrind_total "$dir"
}

ir1=$(run "$n1")
ir2=$(run "$n2")
echo "durability $durability: $ir1 instructions for $n1 requests, $ir2 for $n2:" \
    "$(( (ir2 - ir1) / (n2 - n1) )) per answer"
