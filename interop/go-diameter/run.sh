#!/bin/sh
# Build the go-diameter interop programs into bin/ (gitignored).
#
#   ./run.sh                  build bin/gyclient and bin/gyserver
#   ./run.sh gyclient ARGS..  build, then run bin/gyclient ARGS..
#   ./run.sh gyserver ARGS..  build, then run bin/gyserver ARGS..
#
# Idempotent: when both binaries are newer than every source file it does
# nothing. The only network access is the Go module proxy, and only when
# the module cache lacks github.com/fiorix/go-diameter/v4 v4.1.0 or its
# dependencies (go.sum pins them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if ! command -v go >/dev/null 2>&1; then
	echo "run.sh: the Go toolchain (go 1.25 or later) is not installed" >&2
	exit 127
fi

stale() {
	for b in bin/gyclient bin/gyserver; do
		[ -x "$b" ] || return 0
		if [ -n "$(find go.mod go.sum cmd internal -newer "$b" -print 2>/dev/null | head -n 1)" ]; then
			return 0
		fi
	done
	return 1
}

if stale; then
	mkdir -p bin
	GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -o bin/ ./cmd/gyclient ./cmd/gyserver
fi

if [ $# -gt 0 ]; then
	prog=$1
	shift
	case "$prog" in
	gyclient | gyserver) exec "bin/$prog" "$@" ;;
	*)
		echo "run.sh: unknown program '$prog' (gyclient or gyserver)" >&2
		exit 2
		;;
	esac
fi
