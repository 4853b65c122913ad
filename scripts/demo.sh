#!/usr/bin/env bash
# gyro's main job on its embedded default: builds gyro (release), starts the
# credit-control server on 127.0.0.1:3868 with the demo tariffs and 1,000
# demo accounts, runs the load generator against it for 10 seconds and
# prints what happened. Extra arguments go to `gyro demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }
cargo build --release --locked -p gyro
exec target/release/gyro demo "$@"
