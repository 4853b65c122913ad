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
SUDO_CMD=""
[ "$(id -u)" -eq 0 ] || SUDO_CMD="sudo"
need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v text2pcap >/dev/null 2>&1 || need_apt+=(wireshark-common)
# promtool (Prometheus's own checker) validates the admin API's /metrics.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
# freeDiameterd (an independent Diameter stack in C, TLS by GnuTLS) relays
# gyro load's requests to gyro serve in the freeDiameter interop tests;
# they need its dictionary, routing and ACL extensions too.
command -v freeDiameterd >/dev/null 2>&1 || need_apt+=(freediameterd)
[ -e /usr/lib/freeDiameter/dict_dcca_3gpp.fdx ] || need_apt+=(freediameter-extensions)
if ((${#need_apt[@]})); then
    step "installing ${need_apt[*]}"
    SUDO="$SUDO_CMD"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }

# The interop tests build a Go program on the go-diameter module, which
# needs Go 1.25 or later. Debian 12 ships 1.19, so when no recent Go is on
# the PATH, fetch the official toolchain from the Go module proxy (the same
# way `GOTOOLCHAIN` does) into a cache directory.
GO_WANT=1.25.0
go_ok() {
    command -v go >/dev/null 2>&1 || return 1
    local v
    v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
    [ "$(printf '%s\n%s\n' "$GO_WANT" "$v" | sort -V | head -n1)" = "$GO_WANT" ]
}
if ! go_ok; then
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/gyro/go$GO_WANT"
    if [ ! -x "$cache/bin/go" ]; then
        step "installing Go $GO_WANT from the Go module proxy"
        command -v unzip >/dev/null 2>&1 || { $SUDO_CMD env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip >/dev/null; }
        command -v curl >/dev/null 2>&1 || { $SUDO_CMD env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl ca-certificates >/dev/null; }
        proxy="${GOPROXY:-https://proxy.golang.org}"; proxy="${proxy%%,*}"
        tmp=$(mktemp -d)
        curl -fsSL "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_WANT.linux-amd64.zip" -o "$tmp/go.zip"
        unzip -q "$tmp/go.zip" -d "$tmp"
        mkdir -p "$(dirname "$cache")"
        rm -rf "$cache"
        mv "$tmp/golang.org/toolchain@v0.0.1-go$GO_WANT.linux-amd64" "$cache"
        chmod +x "$cache/bin/"* "$cache/pkg/tool/"*/* 2>/dev/null || true
        rm -rf "$tmp"
    fi
    export PATH="$cache/bin:$PATH"
fi

# --- checks ---------------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The Redis ledger tests (crates/store/tests/redis_*.rs) run against a real
# Redis Cluster: three masters and three replicas on 127.0.0.1:7380-7385
# (redis-server installed when missing), torn down when the suite ends.
step "Redis Cluster for the Redis ledger tests"
GYRO_REDIS_NODES=$(scripts/redis-cluster.sh start | paste -sd, -)
export GYRO_REDIS_NODES GYRO_REDIS_REQUIRED=1
trap 'scripts/redis-cluster.sh stop' EXIT

step "cargo test (workspace)"
cargo test --workspace --locked

step "python tests (bench scripts, against the gyro just built)"
python3 -m unittest discover -s bench -p 'test_*.py'

step "go test (interop programs)"
(cd interop/go-diameter && go vet ./... && go test ./...)

# --- fuzz smoke -----------------------------------------------------------
if [ "${GYRO_FUZZ_SECONDS:-8}" != "0" ] && [ -x scripts/fuzz-smoke.sh ]; then
    step "fuzz targets, ${GYRO_FUZZ_SECONDS:-8}s each"
    scripts/fuzz-smoke.sh "${GYRO_FUZZ_SECONDS:-8}"
fi

step "all tests passed"
