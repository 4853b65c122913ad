#!/usr/bin/env python3
"""Overload behaviour of gyro: answered 2001/s, 3004/s, timeouts, p99 and
the server's peak RSS as the number of requests in flight grows.

Each level runs `gyro load` closed loop with CONNECTIONS x WINDOW requests
in flight (far more than one worker can answer within its wait bound at the
higher levels) against a fresh `gyro serve` (durability sync, 1 worker,
pinned to CPU 0; the load on CPU 1), sampling the server's VmRSS every
100 ms:

    bench/overload.py                                   # the tree's build
    bench/overload.py --servers before@/tmp/gyro-old after@target/release/gyro
    bench/overload.py --levels 50x128 150x128 256x2048 --duration 10s
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_level(binary, load_binary, connections, window, args):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gyro-overload-")
    log = open(os.path.join(tmp, "server.log"), "w")
    cmd = ["taskset", "-c", args.server_cpus, binary, "serve", "--workers", "1",
           "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "data")]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, GYRO_LOG="warn"))
    if not wait_port(port, server):
        sys.exit(f"{binary} did not start: see {log.name}")
    peak = [rss_kib(server.pid)]
    done = threading.Event()

    def sample():
        while not done.wait(0.1):
            peak[0] = max(peak[0], rss_kib(server.pid))

    t = threading.Thread(target=sample)
    t.start()
    load = ["taskset", "-c", args.load_cpus, load_binary, "load", "--target",
            f"127.0.0.1:{port}", "-c", str(connections), "--window", str(window),
            "--duration", args.duration, "--timeout", args.timeout, "--json", "--quiet",
            "--max-error-ratio", "1"]
    out = subprocess.run(load, capture_output=True, text=True)
    done.set()
    t.join()
    server.terminate()
    server.wait()
    if out.returncode not in (0, 1):
        sys.exit(f"gyro load failed: {out.stderr}")
    r = json.loads(out.stdout)
    secs = r["elapsed_secs"] or 1
    codes = r["result_codes"]
    return {
        "ok_per_s": codes.get("2001", 0) / secs,
        "busy_per_s": codes.get("3004", 0) / secs,
        "timeouts": r["timeouts"],
        "p99_us": r["latency_us"].get("p99") if r["latency_us"] else None,
        "peak_rss_mib": peak[0] / 1024,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", nargs="+", default=["gyro"],
                   help="NAME@PATH of gyro binaries (default: the tree's release build)")
    p.add_argument("--levels", nargs="+", default=["50x128", "150x128", "256x2048"],
                   help="CONNECTIONSxWINDOW in flight per level")
    p.add_argument("--duration", default="10s")
    p.add_argument("--timeout", default="5s", help="gyro load's request timeout")
    p.add_argument("--server-cpus", default="0")
    p.add_argument("--load-cpus", default="1")
    args = p.parse_args()
    tree = os.path.join(ROOT, "target/release/gyro")
    servers = []
    for s in args.servers:
        name, _, path = s.partition("@")
        servers.append((name, path or tree))
    if any(path == tree for _, path in servers) or not os.path.exists(tree):
        subprocess.run(["cargo", "build", "--release", "-p", "gyro"], cwd=ROOT, check=True)
    print(f"closed loop, {args.duration} per level, 1 worker, durability sync, "
          f"server on CPUs {args.server_cpus}, gyro load on CPUs {args.load_cpus}\n")
    print("| server | in flight (conns x window) | 2001/s | 3004/s | timeouts | p99 | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for level in args.levels:
        c, w = (int(x) for x in level.split("x"))
        for name, path in servers:
            r = run_level(path, tree if os.path.exists(tree) else path, c, w, args)
            p99 = f"{r['p99_us'] / 1000:.1f} ms" if r["p99_us"] is not None else "-"
            print(f"| {name} | {c} x {w} | {r['ok_per_s']:,.0f} | {r['busy_per_s']:,.0f} | "
                  f"{r['timeouts']:,} | {p99} | {r['peak_rss_mib']:.0f} MiB |", flush=True)


if __name__ == "__main__":
    main()
