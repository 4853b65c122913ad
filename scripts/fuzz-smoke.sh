#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time and fails if any crashes.
#
#   scripts/fuzz-smoke.sh [SECONDS]     default 10 seconds per target
#
# Installs what it needs when missing (the nightly toolchain, cargo-fuzz),
# keeps the checked-in seed corpus untouched (new inputs go to a scratch
# corpus under fuzz/target), and prints nothing but a summary on success.
# Crash inputs are left in fuzz/artifacts/<target>/. See fuzz/README.md for
# longer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds="${1:-10}"
case "$seconds" in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
[ "$seconds" -gt 0 ] || exit 0

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
fi

export CARGO_TARGET_DIR="$root/fuzz/target"
cd fuzz
targets=$(cargo +nightly fuzz list)
log="$CARGO_TARGET_DIR/fuzz-smoke"
mkdir -p "$log"

# No sanitizer in this bounded step: the parsers under test are safe Rust
# (but for one str conversion of bytes checked to be ASCII first), so
# what a short run can find is a panic, an overflow or a failed debug
# assertion (-a); an uninstrumented build compiles a little faster and
# runs several times as many inputs in the same seconds. Long sessions
# (fuzz/README.md) keep the default AddressSanitizer.
if ! cargo +nightly fuzz build -O -a --sanitizer none >"$log/build.log" 2>&1; then
    cat "$log/build.log" >&2
    echo "fuzz: build failed" >&2
    exit 1
fi

failed=()
for t in $targets; do
    scratch="$log/corpus/$t"
    mkdir -p "$scratch" "corpus/$t"
    if cargo +nightly fuzz run -O -a --sanitizer none "$t" "$scratch" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$log/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log/$t.log" | tail -1)
        echo "fuzz: $t ok (${seconds}s, ${runs:-?} runs)"
    else
        tail -n 60 "$log/$t.log" >&2
        echo "fuzz: $t FAILED; crash input in fuzz/artifacts/$t/, full log $log/$t.log" >&2
        failed+=("$t")
    fi
done
[ ${#failed[@]} -eq 0 ]
