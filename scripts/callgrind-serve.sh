# Sourced by scripts/answer-instructions.sh and scripts/refusal-instructions.sh:
# runs `$gyro serve --workers 1` under valgrind's callgrind and stops it.
#
#   callgrind_serve DIR PORT LOG_LEVEL    (DIR/gyro.toml written by the caller)
#       starts the server in DIR on 127.0.0.1:PORT, its profile in
#       DIR/callgrind.out, and waits until it listens; sets $server.
#   callgrind_stop
#       stops it (SIGTERM) and waits for callgrind to write its profile.
#   callgrind_total DIR
#       prints the instructions the profile counted.

callgrind_serve() {
    local dir=$1 port=$2 level=$3
    GYRO_LOG=$level valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
        "$gyro" serve --workers 1 --listen "127.0.0.1:$port" --data-dir "$dir/data" \
        --config "$dir/gyro.toml" >"$dir/server.log" 2>&1 &
    server=$!
    for _ in $(seq 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "the server under callgrind did not listen on $port (see $dir/server.log)" >&2
    return 1
}

callgrind_stop() {
    kill -TERM "$server"
    wait "$server" || true
}

callgrind_total() {
    awk '/^(summary|totals):/ { print $2; exit }' "$1/callgrind.out"
}
