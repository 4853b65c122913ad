#!/usr/bin/env bash
# Runs gyro load through freeDiameterd (a relay) to gyro serve, by hand:
#
#   gyro load --TCP--> freeDiameterd --TCP or TLS--> gyro serve
#
#   interop/freediameter/run.sh [tcp|tls] [gyro load options...]
#
# tcp (the default): the relay reaches gyro in plain TCP. tls: over TLS
# (RFC 6733 section 13: TLS at connect, then CER) with certificates made by
# `gyro certs`, the relay presenting a client certificate for its identity.
# Further arguments go to `gyro load` (default: -c 2 -n 2000). Everything
# (configuration, certificates, data directory, logs) goes into a temporary
# directory that is kept and printed at the end.
#
# Needs freeDiameterd and its extensions (Debian: apt-get install
# freediameterd freediameter-extensions) and a built gyro: $GYRO, or
# target/debug/gyro, or gyro on the PATH. Ports: $RELAY_PORT (3870),
# $GYRO_PORT (3868), $GYRO_TLS_PORT (5658), $ADMIN_PORT (3869).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

mode="${1:-tcp}"
case "$mode" in
tcp | tls) [ $# -gt 0 ] && shift ;;
-*) mode=tcp ;;
*) echo "usage: $0 [tcp|tls] [gyro load options...]" >&2; exit 2 ;;
esac

gyro="${GYRO:-}"
if [ -z "$gyro" ]; then
    if [ -x "$root/target/debug/gyro" ]; then gyro="$root/target/debug/gyro"
    elif command -v gyro >/dev/null 2>&1; then gyro="$(command -v gyro)"
    else echo "no gyro binary: cargo build -p gyro (or set GYRO)" >&2; exit 1
    fi
fi
command -v freeDiameterd >/dev/null 2>&1 || {
    echo "freeDiameterd not found: apt-get install freediameterd freediameter-extensions" >&2
    exit 1
}
ext="${FREEDIAMETER_EXTENSIONS:-}"
if [ -z "$ext" ]; then
    for d in /usr/lib/freeDiameter /usr/lib/x86_64-linux-gnu/freeDiameter \
        /usr/lib64/freeDiameter /usr/local/lib/freeDiameter; do
        [ -e "$d/dict_dcca_3gpp.fdx" ] && { ext="$d"; break; }
    done
fi
[ -n "$ext" ] && [ -e "$ext/rt_default.fdx" ] || {
    echo "freeDiameter extensions not found (set FREEDIAMETER_EXTENSIONS)" >&2
    exit 1
}

relay_port="${RELAY_PORT:-3870}"
gyro_port="${GYRO_PORT:-3868}"
gyro_tls_port="${GYRO_TLS_PORT:-5658}"
admin_port="${ADMIN_PORT:-3869}"
work="$(mktemp -d "${TMPDIR:-/tmp}/gyro-freediameter.XXXXXX")"

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "logs, configuration and data: $work"
}
trap cleanup EXIT

# gyro serve: plain TCP always, a TLS listener in tls mode.
{
    echo "[admin]"
    echo "listen = \"127.0.0.1:$admin_port\""
} >"$work/gyro.toml"
if [ "$mode" = tls ]; then
    "$gyro" certs "$work/certs" --client relay.gyro.test --client-file relay >/dev/null
    cat >>"$work/gyro.toml" <<EOF
[tls]
listen = ["127.0.0.1:$gyro_tls_port"]
cert = "$work/certs/server.pem"
key = "$work/certs/server.key"
client_ca = "$work/certs/ca.pem"
EOF
    target_port="$gyro_tls_port"
    tls="TLS_Cred = \"$work/certs/relay.pem\", \"$work/certs/relay.key\";\\nTLS_CA = \"$work/certs/ca.pem\";"
    peer_tls=""
else
    target_port="$gyro_port"
    tls=""
    peer_tls="No_TLS;"
fi
GYRO_LOG=info "$gyro" serve --listen "127.0.0.1:$gyro_port" --data-dir "$work/data" \
    -c "$work/gyro.toml" >"$work/gyro.log" 2>&1 &
pids+=($!)

# freeDiameterd, from the template.
sed -e "s|@IDENTITY@|relay.gyro.test|" -e "s|@PORT@|$relay_port|" -e "s|@TW@|30|" \
    -e "s|@TLS@|$tls|" -e "s|@EXT@|$ext|g" -e "s|@CONF@|$here|g" \
    -e "s|@GYRO_PORT@|$target_port|" -e "s|@PEER_TLS@|$peer_tls|" \
    "$here/relay.conf.in" >"$work/relay.conf"

for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$admin_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
freeDiameterd -c "$work/relay.conf" >"$work/relay.log" 2>&1 &
pids+=($!)

echo "waiting for the relay's link to gyro ($mode, port $target_port)..."
for _ in $(seq 300); do
    grep -q "'STATE_OPEN'.*'ocs.gyro.test'" "$work/relay.log" && break
    sleep 0.1
done
grep "Connected to 'ocs.gyro.test'" "$work/relay.log" || {
    echo "the relay did not connect; its log:" >&2
    tail -n 30 "$work/relay.log" >&2
    exit 1
}

[ $# -gt 0 ] || set -- -c 2 -n 2000
"$gyro" load --target "127.0.0.1:$relay_port" "$@"

echo
echo "gyro's peers (GET /v1/peers):"
curl -fsS "http://127.0.0.1:$admin_port/v1/peers"
echo
