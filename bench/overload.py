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

With --offered the levels are open loop instead: the server's capacity is
measured first (closed loop, the first --levels entry), then `gyro load`
offers each multiple of it (e.g. 1 3 10) at intended send times, and the
table shows answered 2001/s, 3004/s, timeouts, p99 of the answered
requests (from intended send time) and peak RSS. One load CPU cannot offer
ten times what a whole server CPU answers, so --cpu-quota limits the
server to a fraction of its CPU (a cgroup CPU quota over 10 ms periods,
root only): the overload is then real, and the generator keeps its
schedule:

    bench/overload.py --offered 1 3 10 --cpu-quota 0.1 --duration 10s
"""

import argparse
import json
import shutil
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


class CpuQuota:
    """A cgroup limiting what joins it to `fraction` of one CPU (cgroup v2
    cpu.max, or v1 cpu.cfs_quota_us): over 10 ms periods, or longer ones
    for fractions under 10 % (a quota is at least 1 ms)."""

    def __init__(self, fraction):
        if not 0 < fraction <= 1:
            sys.exit(f"--cpu-quota {fraction}: a fraction of one CPU, in (0, 1]")
        self.PERIOD_US = max(10_000, int(1000 / fraction + 0.5))
        quota = int(self.PERIOD_US * fraction + 0.5)
        name = f"gyro-overload-{os.getpid()}"
        v2 = "/sys/fs/cgroup/unified" if os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") \
            else "/sys/fs/cgroup"
        if os.path.exists(os.path.join(v2, "cgroup.controllers")) and \
                "cpu" in open(os.path.join(v2, "cgroup.controllers")).read().split():
            self.path = os.path.join(v2, name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.max"), "w") as f:
                f.write(f"{quota} {self.PERIOD_US}")
        else:
            self.path = os.path.join("/sys/fs/cgroup/cpu", name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.cfs_period_us"), "w") as f:
                f.write(str(self.PERIOD_US))
            with open(os.path.join(self.path, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(quota))

    def wrap(self, cmd):
        """`cmd` run inside the cgroup (the shell joins it, then execs)."""
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def run_level(binary, load_binary, connections, window, args, rate=None, quota=None):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gyro-overload-")
    log = open(os.path.join(tmp, "server.log"), "w")
    cmd = ["taskset", "-c", args.server_cpus, binary, "serve", "--workers", "1",
           "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "data")]
    if quota:
        cmd = quota.wrap(cmd)
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
    if rate:
        load += ["--rate", str(rate), "--warmup", "1s"]
    out = subprocess.run(load, capture_output=True, text=True)
    done.set()
    t.join()
    server.terminate()
    server.wait()
    shutil.rmtree(tmp, ignore_errors=True)
    if out.returncode not in (0, 1):
        sys.exit(f"gyro load failed: {out.stderr}")
    r = json.loads(out.stdout)
    secs = r["elapsed_secs"] or 1
    codes = r["result_codes"]
    return {
        "rate": r["rate"],
        "offered": r.get("offered_rate"),
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
    p.add_argument("--offered", type=float, nargs="+", metavar="MULTIPLE",
                   help="open loop at these multiples of the measured capacity (e.g. 1 3 10)")
    p.add_argument("--cpu-quota", type=float, metavar="FRACTION",
                   help="limit the server to this fraction of one CPU (cgroup; root only)")
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
    quota = CpuQuota(args.cpu_quota) if args.cpu_quota else None
    try:
        if args.offered:
            open_loop(servers, tree, args, quota)
        else:
            closed_loop(servers, tree, args, quota)
    finally:
        if quota:
            quota.remove()


def open_loop(servers, tree, args, quota):
    limit = f", server limited to {args.cpu_quota:.0%} of a CPU" if quota else ""
    c, w = (int(x) for x in args.levels[0].split("x"))
    print(f"open loop, {args.duration} per level (latency after a 1 s warm-up), 1 worker, "
          f"durability sync, server on CPUs {args.server_cpus}{limit}, gyro load on CPUs "
          f"{args.load_cpus}; capacity measured closed loop with {c} x {w} in flight\n")
    print("| server | offered | asked/s | offered/s | 2001/s | 3004/s | timeouts | p99 | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, path in servers:
        load = tree if os.path.exists(tree) else path
        cap = run_level(path, load, c, w, args, quota=quota)["ok_per_s"]
        for m in args.offered:
            rate = max(1, round(cap * m))
            # Enough in flight for the schedule: the rate for the timeout.
            window = max(64, min(65536, int(rate * 5 / 50)))
            r = run_level(path, load, 50, window, args, rate=rate, quota=quota)
            p99 = f"{r['p99_us'] / 1000:.1f} ms" if r["p99_us"] is not None else "-"
            offered = f"{r['offered']:,.0f}" if r["offered"] is not None else "-"
            print(f"| {name} | {m:g}x | {rate:,} | {offered} | {r['ok_per_s']:,.0f} | "
                  f"{r['busy_per_s']:,.0f} | {r['timeouts']:,} | {p99} | "
                  f"{r['peak_rss_mib']:.0f} MiB |", flush=True)


def closed_loop(servers, tree, args, quota):
    print(f"closed loop, {args.duration} per level, 1 worker, durability sync, "
          f"server on CPUs {args.server_cpus}, gyro load on CPUs {args.load_cpus}\n")
    print("| server | in flight (conns x window) | 2001/s | 3004/s | timeouts | p99 | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for level in args.levels:
        c, w = (int(x) for x in level.split("x"))
        for name, path in servers:
            r = run_level(path, tree if os.path.exists(tree) else path, c, w, args, quota=quota)
            p99 = f"{r['p99_us'] / 1000:.1f} ms" if r["p99_us"] is not None else "-"
            print(f"| {name} | {c} x {w} | {r['ok_per_s']:,.0f} | {r['busy_per_s']:,.0f} | "
                  f"{r['timeouts']:,} | {p99} | {r['peak_rss_mib']:.0f} MiB |", flush=True)


if __name__ == "__main__":
    main()
