#!/usr/bin/env python3
"""Measure a Diameter credit-control server with `gyro load`.

For each combination of server workers and load connections it starts the
server (pinned with taskset), runs `gyro load` (pinned to other CPUs) and
reports answered CCR/s, latency percentiles and the server's CPU time per
answer (user+sys of the server process divided by answers), all measured in
one run.

    bench/server.py                                # gyro, workers 1 2, connections 1 50
    bench/server.py --workers 1 --connections 50 --rate 50000
    bench/server.py --server gyserver              # the go-diameter server in interop/
    bench/server.py --allocations                  # heap allocations per request

Build first: cargo build --release -p gyro (the script does it), and for
--server gyserver: interop/go-diameter/run.sh.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    t = time.time()
    while time.time() - t < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on port {port} did not start")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_server(kind, workers, port, cpus, data_dir, gyro, durability=None):
    if kind == "gyro":
        cmd = [gyro, "serve", "--workers", str(workers), "--listen", f"127.0.0.1:{port}",
               "--data-dir", data_dir]
        if durability:
            cfg = os.path.join(data_dir, "bench.toml")
            with open(cfg, "w") as f:
                f.write(f'[storage]\ndurability = "{durability}"\n')
            cmd += ["--config", cfg]
    else:
        cmd = [os.path.join(ROOT, "interop/go-diameter/bin/gyserver"), "-addr",
               f"127.0.0.1:{port}", "-procs", str(workers)]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    env = dict(os.environ, GYRO_LOG="info")
    log = open(os.path.join(data_dir, "server.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    wait_port(port)
    return p


def run_load(gyro, port, args, connections, cpus):
    cmd = [gyro, "load", "--target", f"127.0.0.1:{port}", "--connections", str(connections),
           "--threads", str(args.load_threads), "--scenario", args.scenario, "--json", "--quiet",
           "--max-error-ratio", "1"]
    if args.count:
        cmd += ["--count", str(args.count)]
    else:
        cmd += ["--duration", args.duration]
    if args.rate:
        cmd += ["--rate", str(args.rate)]
    if args.window:
        cmd += ["--window", str(args.window)]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"gyro load failed: {out.stderr}")
    return json.loads(out.stdout)


def log_fields(log_path, marker):
    """The key=value fields of the last log line containing `marker`."""
    fields = {}
    with open(log_path) as f:
        for line in f:
            if marker in line:
                fields = dict(p.split("=", 1) for p in line.split() if "=" in p)
    return fields


def allocations(log_path):
    n = log_fields(log_path, "heap allocations since start").get("allocations")
    return int(n) if n is not None else None


def measure(args, gyro, workers, connections):
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="gyro-bench-")
    try:
        server = start_server(args.server, workers, port, args.server_cpus, data_dir, gyro,
                              args.durability)
        before = cpu_seconds(server.pid)
        t0 = time.time()
        report = run_load(gyro, port, args, connections, args.load_cpus)
        wall = time.time() - t0
        after = cpu_seconds(server.pid)
        server.terminate()
        server.wait(timeout=60)
        log = os.path.join(data_dir, "server.log")
        allocs = allocations(log) if args.server == "gyro" else None
        dur = log_fields(log, "durability totals") if args.server == "gyro" else {}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    answered = report["answered"]
    lat = report["latency_us"]
    return {
        "server": args.server,
        "workers": workers,
        "connections": connections,
        "answered": answered,
        "rate": report["rate"],
        "errors": report["errors"],
        "cpu_s": after - before,
        "cpu_us_per_answer": (after - before) * 1e6 / max(answered, 1),
        "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "p999": lat["p999"],
        "max": lat["max"],
        "allocations": allocs,
        "syncs_per_s": int(dur.get("syncs", 0)) / wall if dur else None,
        "records_per_commit": float(dur["records_per_commit"]) if dur else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["gyro", "gyserver"], default="gyro")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--connections", type=int, nargs="+", default=[1, 50])
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--count", type=int)
    ap.add_argument("--rate", type=float, help="open loop at this many requests/s")
    ap.add_argument("--window", type=int)
    ap.add_argument("--scenario", default="data")
    ap.add_argument("--load-threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0", help="taskset CPU list for the server ('' = none)")
    ap.add_argument("--load-cpus", default="1", help="taskset CPU list for gyro load ('' = none)")
    ap.add_argument("--allocations", action="store_true",
                    help="build with count-allocations and report allocations per request "
                         "(difference between a short and a long run)")
    ap.add_argument("--durability", choices=["sync", "async", "none"],
                    help="gyro's [storage] durability (default: its default, sync)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    features = ["--features", "count-allocations"] if args.allocations else []
    subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro"] + features,
                   cwd=ROOT, check=True)
    gyro = os.path.join(ROOT, "target/release/gyro")
    if args.server == "gyserver":
        subprocess.run([os.path.join(ROOT, "interop/go-diameter/run.sh")], check=True)

    if args.allocations:
        rows = []
        for count in (20_000, 220_000):
            args.count = count
            rows.append(measure(args, gyro, args.workers[0], args.connections[0]))
        d_alloc = rows[1]["allocations"] - rows[0]["allocations"]
        d_req = rows[1]["answered"] - rows[0]["answered"]
        print(f"allocations: {rows[0]['allocations']} after {rows[0]['answered']} answers, "
              f"{rows[1]['allocations']} after {rows[1]['answered']}: "
              f"{d_alloc / d_req:.3f} allocations per request in steady state")
        return

    rows = [measure(args, gyro, w, c) for w in args.workers for c in args.connections]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"server={args.server} durability={args.durability or 'default'} scenario={args.scenario} "
          f"{'rate=' + str(args.rate) if args.rate else 'closed loop'} "
          f"server cpus={args.server_cpus or 'any'} load cpus={args.load_cpus or 'any'}")
    print("| workers | conns | answered | answers/s | errors | server CPU us/answer | p50 us | p99 us | p99.9 us | max us | fsync/s | records/commit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        fs = f"{r['syncs_per_s']:.0f}" if r["syncs_per_s"] is not None else "-"
        rc = f"{r['records_per_commit']:.1f}" if r["records_per_commit"] is not None else "-"
        print(f"| {r['workers']} | {r['connections']} | {r['answered']} | {r['rate']:.0f} | {r['errors']} "
              f"| {r['cpu_us_per_answer']:.2f} | {r['p50']} | {r['p99']} | {r['p999']} | {r['max']} | {fs} | {rc} |")


if __name__ == "__main__":
    main()
