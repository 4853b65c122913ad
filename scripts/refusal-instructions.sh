#!/usr/bin/env bash
# Instructions the server spends per DIAMETER_TOO_BUSY (3004) refusal of
# overload control, counted by valgrind (callgrind) the way
# scripts/answer-instructions.sh counts them per answer, so the two compare.
#
#   scripts/refusal-instructions.sh [GYRO] [PER_2001] [N1] [N2]
#
# Runs `GYRO serve --workers 1` under callgrind with max_queue_wait_ms = 1,
# twice, each time driven by `gyro load -c 1` (data scenario) that writes
# N1 and then N2 requests (default 20000 and 60000) at once, all in
# flight: under valgrind the server reads them far slower than they come,
# so almost every request has waited more than 1 ms when it is read and is
# refused. A few are answered normally (the first reads); PER_2001, the
# instructions of one answer (from answer-instructions.sh, durability
# none; default 0), takes them out. Prints (Ir(N2) - Ir(N1) - PER_2001 *
# (ok(N2) - ok(N1))) / (busy(N2) - busy(N1)), where ok and busy are the
# 2001 and 3004 counts the load generator received: the instructions of
# one more refusal, start-up and shutdown cancelled out.
set -euo pipefail
cd "$(dirname "$0")/.."
gyro="${1:-target/release/gyro}"
per_ok="${2:-0}"
n1="${3:-20000}"
n2="${4:-60000}"
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
[ -x "$gyro" ] || { echo "$gyro: no such binary" >&2; exit 1; }
gyro=$(realpath "$gyro")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. scripts/callgrind-serve.sh

# "instructions 2001s 3004s" of a server sent $1 requests at once.
run() {
    local n=$1 dir="$work/$1" port=$((20000 + RANDOM % 20000))
    mkdir -p "$dir"
    printf '[storage]\ndurability = "none"\n[admin]\nlisten = "127.0.0.1:%d"\n[limits]\nmax_queue_wait_ms = 1\n' \
        $((port + 1)) >"$dir/gyro.toml"
    callgrind_serve "$dir" "$port" error
    "$gyro" load --target "127.0.0.1:$port" -c 1 --threads 1 -w 65536 -n "$n" --timeout 120s \
        --max-error-ratio 1 --quiet --json >"$dir/load.json" || true
    callgrind_stop
    python3 - "$dir/load.json" "$(callgrind_total "$dir")" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
if r["timeouts"] or r["lost"] or r["connection_errors"]:
    sys.exit(f"load: {r['timeouts']} timeouts, {r['lost']} lost, {r['connection_errors']} connection errors")
c = r["result_codes"]
print(sys.argv[2], c.get("2001", 0), c.get("3004", 0))
EOF
}

read -r ir1 ok1 busy1 < <(run "$n1")
read -r ir2 ok2 busy2 < <(run "$n2")
echo "$n1 requests: $ir1 instructions, $ok1 answered 2001, $busy1 refused 3004"
echo "$n2 requests: $ir2 instructions, $ok2 answered 2001, $busy2 refused 3004"
echo "per refusal: $(( (ir2 - ir1 - per_ok * (ok2 - ok1)) / (busy2 - busy1) )) instructions" \
    "(with $per_ok per 2001)"
