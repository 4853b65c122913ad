#!/usr/bin/env bash
# gyro's whole test suite. Installs what the tests need (idempotently), then
# runs formatting and lint checks, every crate's tests, the interop tests and
# a short bounded run of every fuzz target.
#
#   scripts/test.sh            everything
#   GYRO_FUZZ_SECONDS=0 ...    skip the fuzz smoke run
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# --- prerequisites --------------------------------------------------------
need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v text2pcap >/dev/null 2>&1 || need_apt+=(wireshark-common)
if ((${#need_apt[@]})); then
    step "installing ${need_apt[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }

# --- checks ---------------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (workspace)"
cargo test --workspace --locked

# --- fuzz smoke -----------------------------------------------------------
if [ "${GYRO_FUZZ_SECONDS:-30}" != "0" ] && [ -x scripts/fuzz-smoke.sh ]; then
    step "fuzz targets, ${GYRO_FUZZ_SECONDS:-30}s each"
    scripts/fuzz-smoke.sh "${GYRO_FUZZ_SECONDS:-30}"
fi

step "all tests passed"
