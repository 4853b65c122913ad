#!/usr/bin/env python3
"""Measure Diameter credit-control servers side by side with `gyro load`.

One invocation runs every server given with --servers, for each number of
server workers and load connections, with the server pinned to
--server-cpus and `gyro load` to --load-cpus (the same CPUs for every
server), and prints ONE Markdown table (or JSON with --json):

    bench/server.py --servers gyro-sync gyro-none gyserver --workers 1 2 \\
        --connections 1 50 --duration 8s
    bench/server.py --servers gyro-sync@/tmp/gyro-before gyro-sync   # before/after
    bench/server.py --servers gyro-sync --connections 50 --rate 50000  # open loop
    bench/server.py --servers gyro-sync --workers 1 --connections 50 \
        --rate-of-max 0.5           # closed loop, then open loop at half its rate
    bench/server.py --servers gyro-sync --connections 50 --rate 50000 \
        --warmup 1s                 # steady-state latency (first second left out)
    bench/server.py --servers gyro-sync --connections 1 --duration 60s \\
        --config-extra storage.snapshot_every_records=200000 storage.cdr_max_bytes=8000000
    bench/server.py --servers gyro-sync gyro-none --allocations       # heap allocations
    bench/server.py --servers gyro-sync --workers 1 --connections 1 \
        --rate 5000 --threads           # where the CPU goes, thread by thread
    bench/server.py --servers gyro-sync --workers 1 --connections 50 \
        --scrape-metrics 1                  # the cost of scraping /metrics every second
    bench/server.py --servers gyro-sync --workers 1 --connections 50 \
        --top-ups 50                        # admin API top-up latency under CCR load
    bench/server.py --servers gyro-sync gyro-sync+nchf --workers 1 \
        --connections 4 --window 16         # Gy and Nchf side by side

Servers:
  gyro-sync, gyro-async, gyro-none   gyro with that [storage] durability
  gyro                               gyro with its configured default
  gyro-sync+nchf, ...                the same gyro driven over Nchf (5G
                                     converged charging, HTTP/2 h2c) by
                                     `gyro load --protocol nchf`: the same
                                     scenario and engine, the other interface
  gyserver                           the go-diameter echo server in interop/
                                     (built by interop/go-diameter/run.sh;
                                     keeps no balances, writes nothing)
  NAME@PATH                          a gyro server NAME run from the binary
                                     PATH (e.g. one built before a change);
                                     the row is labelled NAME@<file name>
  NAME=COMMAND                       any other server, started with COMMAND
                                     ({port} and {workers} replaced), e.g.
                                     'mine=/opt/ocs --port {port}'

Columns: answers/s; server CPU time (user+sys from /proc/<pid>/stat)
divided by answers; latency percentiles from each request's intended send
time (gyro load's histograms); disk bytes per CCR-Update: bytes the server
process caused to be written to storage (/proc/<pid>/io write_bytes, which
counts journal, CDR and snapshot files, not sockets) divided by CCR-U
answered (whole 4 KiB pages: a page synced again after each small group
commit counts each time), and the growth of the data directory per CCR-U
(the bytes the files hold, snapshots and rotations included, deleted files
not); with --threads, the server's CPU per answer by thread (the
threads of all workers counted together: worker, sync, cdr, compact, ...)
and each one's context switches per answer, from /proc/<pid>/task (the
JSON rows always carry it, as "threads_per_answer"); heap allocations per
request in steady state with --allocations
(from a short and a long run of a build with the count-allocations feature:
the difference of the allocation counts over the difference of requests).

A run where the load generator was the bottleneck (its CPU at 90 % or more
of --load-cpus, or its busiest load thread busy 90 % of the run by its own
report, while the server used less than 85 % of --server-cpus) is not
reported: the row says so instead of showing numbers that measure the
generator. Open-loop rows also show the rate asked, the rate `gyro load`
actually offered and how late requests left after their intended send
time (p99), so a reader sees the generator kept its schedule.

Each gyro server gets its own free admin API port (admin.listen). With
--scrape-metrics SECONDS a thread (on --load-cpus) fetches /metrics from it
that often during the load; the server CPU per answer then includes what
the scrapes cost the server. With --top-ups RATE a thread (on --load-cpus)
tops up demo accounts over the admin API at that rate during the load
(one keep-alive HTTP connection, a new idempotency key each time) and the
row gets the top-ups' latency percentiles (request sent to answer read).

Builds the tree's gyro first (cargo build --release -p gyro) unless --gyro
names a binary; that binary also runs the load for every row.
"""

import argparse
import http.client
import json
import os
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
DURABILITIES = {"gyro-sync": "sync", "gyro-async": "async", "gyro-none": "none", "gyro": None}
LOAD_BOUND = 0.90
SERVER_SATURATED = 0.85


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=60):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def thread_group(name):
    """A thread's name without its trailing number: the threads of every
    worker count together (gyro-worker-0 and gyro-worker-1 are
    gyro-worker)."""
    head, sep, tail = name.rpartition("-")
    return head if sep and head and tail.isdigit() else name


def thread_stats(pid):
    """{thread group: (CPU seconds, context switches)} of the live threads
    of `pid` (/proc/<pid>/task/*: user+sys time, voluntary and involuntary
    switches: a thread that sleeps and wakes up switches twice)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"{base}/comm") as f:
                name = thread_group(f.read().strip())
            with open(f"{base}/status") as f:
                switches = sum(int(l.split()[1]) for l in f if "ctxt_switches:" in l)
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        cpu, n = out.get(name, (0.0, 0))
        out[name] = (cpu + (int(fields[11]) + int(fields[12])) / TICK, n + switches)
    return out


def per_answer_by_thread(before, after, answered):
    """{thread group: {"cpu_us": ..., "switches": ...}} per answer between
    two `thread_stats`, busiest first (threads started in between count
    from zero)."""
    n = max(answered, 1)
    rows = {}
    for name, (cpu, sw) in after.items():
        cpu0, sw0 = before.get(name, (0.0, 0))
        rows[name] = {"cpu_us": (cpu - cpu0) * 1e6 / n, "switches": (sw - sw0) / n}
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["cpu_us"]))


def fmt_threads(by_thread):
    """The --threads column: each thread group's CPU per answer (us) and
    context switches per answer, busiest first, groups under 0.01 us left
    out."""
    parts = []
    for name, v in by_thread.items():
        if v["cpu_us"] >= 0.01:
            short = name[len("gyro-"):] if name.startswith("gyro-") else name
            parts.append(f"{short} {v['cpu_us']:.2f} ({v['switches']:.3f} sw)")
    return ", ".join(parts) or "-"


def write_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        io = dict(line.split(": ") for line in f.read().splitlines())
    return int(io["write_bytes"])


def dir_bytes(path):
    """Total size of the files under `path` (0 when it does not exist)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def cpu_count(cpus):
    """Number of CPUs in a taskset list like '0', '1-3', '0,2'."""
    if not cpus:
        return os.cpu_count() or 1
    n = 0
    for part in cpus.split(","):
        a, _, b = part.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def parse_server(spec, default_gyro):
    name, eq, command = spec.partition("=")
    if eq and name and "@" not in name:
        if "{port}" not in command:
            sys.exit(f"server {name!r}: its command must contain {{port}}")
        return {"label": name, "kind": "command", "command": command}
    name, _, path = spec.partition("@")
    name, plus, protocol = name.partition("+")
    if plus and protocol != "nchf":
        sys.exit(f"server {spec!r}: the only protocol suffix is +nchf")
    if name == "gyserver":
        if path:
            sys.exit("gyserver takes no @PATH")
        return {"label": spec, "kind": "gyserver"}
    if name not in DURABILITIES:
        sys.exit(f"unknown server {name!r}: one of {', '.join(list(DURABILITIES) + ['gyserver'])}")
    if plus and name == "gyserver":
        sys.exit("gyserver speaks Diameter only")
    name_p = name + plus + protocol
    label = f"{name_p}@{os.path.basename(path)}" if path else name_p
    return {"label": label, "kind": "gyro", "durability": DURABILITIES[name],
            "binary": os.path.abspath(path) if path else default_gyro, "own_binary": bool(path),
            "protocol": protocol or "diameter"}


def toml_value(value):
    """`value` as TOML: kept as written when it already is a TOML number,
    boolean, string or array, else quoted as a string (so `cdr_format=csv`
    works as well as `cdr_format="csv"`)."""
    v = value.strip()
    if v in ("true", "false") or v[:1] in ('"', "'", "["):
        return v
    try:
        float(v.replace("_", ""))
        return v
    except ValueError:
        return json.dumps(v)


def config_toml(durability, extras, admin_port=None):
    """A gyro config: the durability, the admin API's port and each
    `section.key=value` override (value in TOML syntax; a bare word is
    taken as a string)."""
    sections = {}
    if admin_port:
        sections.setdefault("admin", []).append(f'listen = "127.0.0.1:{admin_port}"')
    if durability:
        sections.setdefault("storage", []).append(f'durability = "{durability}"')
    for e in extras:
        key, _, value = e.partition("=")
        section, _, name = key.strip().rpartition(".")
        if not section or not value:
            sys.exit(f"--config-extra {e!r}: expected section.key=value")
        sections.setdefault(section, []).append(f"{name} = {toml_value(value)}")
    return "".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items())


def start_server(server, binary, workers, port, cpus, data_dir, extras, admin_port=None):
    if server["kind"] == "gyro":
        nchf = server.get("protocol") == "nchf"
        # Over Nchf, `port` is the HTTP/2 listener and Diameter gets another.
        diameter = free_port() if nchf else port
        cmd = [binary, "serve", "--workers", str(workers), "--listen", f"127.0.0.1:{diameter}",
               "--data-dir", os.path.join(data_dir, "data")]
        if nchf:
            extras = [*extras, f"nchf.listen=127.0.0.1:{port}"]
        toml = config_toml(server["durability"], extras, admin_port)
        if toml:
            cfg = os.path.join(data_dir, "bench.toml")
            with open(cfg, "w") as f:
                f.write(toml)
            cmd += ["--config", cfg]
    elif server["kind"] == "command":
        cmd = shlex.split(server["command"].format(port=port, workers=workers))
    else:
        cmd = [os.path.join(ROOT, "interop/go-diameter/bin/gyserver"), "-addr",
               f"127.0.0.1:{port}", "-procs", str(workers)]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    env = dict(os.environ, GYRO_LOG="info")
    log = open(os.path.join(data_dir, "server.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if not wait_port(port, p):
        p.kill()
        sys.exit(f"{server['label']} did not start: see {log.name}\n" + open(log.name).read()[-2000:])
    return p


def run_load(gyro, port, args, connections, count=None, rate=None, extra=()):
    cmd = [gyro, "load", "--target", f"127.0.0.1:{port}", "--connections", str(connections),
           "--threads", str(args.load_threads), "--scenario", args.scenario, "--json", "--quiet",
           "--max-error-ratio", "1", *extra]
    cmd += ["--count", str(count)] if count else ["--duration", args.duration]
    if rate:
        cmd += ["--rate", str(rate)]
    if args.window:
        cmd += ["--window", str(args.window)]
    if args.warmup and not count:
        cmd += ["--warmup", args.warmup]
    if args.load_cpus:
        cmd = ["taskset", "-c", args.load_cpus] + cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        sys.exit(f"gyro load failed: {out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), cpu, wall


def percentile(values, p):
    """The p-th percentile (nearest rank) of `values`, or None."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v))) - 1))]


class AdminLoad:
    """Work on a gyro's admin API in a thread while the CCR load runs:
    scraping /metrics every `scrape_every` seconds and/or topping up at
    `top_up_rate` per second. The thread runs on `cpus` (a taskset list)."""

    def __init__(self, port, cpus, scrape_every=None, top_up_rate=None, subscribers=1000):
        self.port, self.cpus = port, cpus
        self.scrape_every, self.top_up_rate = scrape_every, top_up_rate
        self.subscribers = subscribers
        self.scrapes, self.scrape_ms, self.scrape_bytes = 0, [], 0
        self.top_up_ms, self.top_up_errors = [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        if self.scrape_every or self.top_up_rate:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=30)

    def run(self):
        if self.cpus:
            cpus = set()
            for part in self.cpus.split(","):
                a, _, b = part.partition("-")
                cpus.update(range(int(a), int(b or a) + 1))
            os.sched_setaffinity(0, cpus)  # this thread only
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        now = time.monotonic()
        next_scrape = now + (self.scrape_every or 0)
        next_top_up = now
        n = 0
        while not self.stop.is_set():
            now = time.monotonic()
            if self.scrape_every and now >= next_scrape:
                next_scrape += self.scrape_every
                t = time.monotonic()
                status, body = self.call(conn, "GET", "/metrics")
                if status == 200:
                    self.scrapes += 1
                    self.scrape_bytes += len(body)
                    self.scrape_ms.append((time.monotonic() - t) * 1000)
            if self.top_up_rate and now >= next_top_up:
                next_top_up += 1 / self.top_up_rate
                msisdn = 46700000000 + n % self.subscribers
                body = json.dumps({"amount": 1, "idempotency_key": f"bench-{os.getpid()}-{n}"})
                n += 1
                t = time.monotonic()
                status, _ = self.call(conn, "POST", f"/v1/accounts/{msisdn}/top-ups", body)
                if status == 200:
                    self.top_up_ms.append((time.monotonic() - t) * 1000)
                else:
                    self.top_up_errors += 1
            due = min(x for x in (next_scrape if self.scrape_every else None,
                                  next_top_up if self.top_up_rate else None) if x is not None)
            self.stop.wait(max(0.0, due - time.monotonic()))

    @staticmethod
    def call(conn, method, path, body=None):
        try:
            headers = {"Content-Type": "application/json"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            return 0, str(e).encode()

    def fields(self):
        return {
            "scrapes": self.scrapes,
            "scrape_ms_mean": sum(self.scrape_ms) / len(self.scrape_ms) if self.scrape_ms else None,
            "scrape_bytes": self.scrape_bytes // self.scrapes if self.scrapes else None,
            "top_ups": len(self.top_up_ms), "top_up_errors": self.top_up_errors,
            "top_up_p50_ms": percentile(self.top_up_ms, 50),
            "top_up_p99_ms": percentile(self.top_up_ms, 99),
        }


def log_fields(log_path, marker):
    """The key=value fields of the last log line containing `marker`."""
    fields = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            if marker in line:
                fields = dict(p.split("=", 1) for p in line.split() if "=" in p)
    return fields


def ccr_u_answered(report):
    return sum(t["answered"] for t in report["per_type"] if t["name"] == "CCR-U")


_ADMIN = {}


def has_admin(binary):
    """Whether this gyro build has the admin API (builds from before it
    refuse an [admin] section): it has `gyro account` then."""
    if binary not in _ADMIN:
        r = subprocess.run([binary, "account", "--help"], capture_output=True)
        _ADMIN[binary] = r.returncode == 0
    return _ADMIN[binary]


def measure(args, server, binary, load_gyro, workers, connections, count=None, rate=None,
            load_extra=()):
    """One run: the server started on its CPUs, `gyro load` (with
    `load_extra` arguments) against it; the row, with gyro load's whole
    JSON report under "load_report"."""
    port = free_port()
    gyro = server["kind"] == "gyro"
    admin_ok = gyro and has_admin(binary)
    admin_port = free_port() if admin_ok else None
    tmp = tempfile.mkdtemp(prefix="gyro-bench-")
    proc = None
    try:
        proc = start_server(server, binary, workers, port, args.server_cpus, tmp, args.config_extra,
                            admin_port)
        data = os.path.join(tmp, "data")
        admin = AdminLoad(admin_port, args.load_cpus, args.scrape_metrics if admin_ok else None,
                          args.top_ups if admin_ok else None)
        cpu0, io0, size0 = cpu_seconds(proc.pid), write_bytes(proc.pid), dir_bytes(data)
        threads0 = thread_stats(proc.pid)
        with admin:
            if server.get("protocol") == "nchf":
                load_extra = ("--protocol", "nchf", *load_extra)
            report, load_cpu, wall = run_load(load_gyro, port, args, connections, count, rate,
                                              load_extra)
            cpu1, io1, size1 = cpu_seconds(proc.pid), write_bytes(proc.pid), dir_bytes(data)
            threads1 = thread_stats(proc.pid)
        alive = proc.poll() is None
        proc.terminate()
        proc.wait(timeout=120)
        log = os.path.join(tmp, "server.log")
        allocs = log_fields(log, "heap allocations since start").get("allocations") if gyro else None
        dur = log_fields(log, "durability totals") if gyro else {}
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    answered = report["answered"]
    lat = report["latency_us"]
    server_util = (cpu1 - cpu0) / (wall * cpu_count(args.server_cpus))
    load_util = load_cpu / (wall * cpu_count(args.load_cpus))
    updates = ccr_u_answered(report)
    notes = []
    if not alive:
        notes.append("server died")
    if report["errors"]:
        notes.append(f"{report['errors']} errors")
    if report.get("connections_opened", connections) < connections:
        notes.append(f"{report['connections_opened']}/{connections} connections opened")
    lag = report.get("send_lag_us")
    if lag and lag["p99"] > 1000:
        notes.append(f"requests left up to {fmt_us(lag['p99'])} late (p99)")
    offered = report.get("offered_rate")
    if rate and offered is not None and offered < 0.97 * rate:
        notes.append(f"offered only {offered:,.0f}/s of the {rate:,.0f}/s asked")
    # gyro load's own account: its busiest load thread (one thread can be
    # saturated while the process uses half of two CPUs).
    gen = report.get("generator") or {}
    load_bound = is_load_bound(load_util, gen.get("busiest_thread", 0.0), server_util)
    if load_bound:
        notes.append(f"LOAD-BOUND: gyro load at {load_util:.0%} of its CPUs (busiest load thread "
                     f"{gen.get('busiest_thread', load_util):.0%}), server at "
                     f"{server_util:.0%}: not reported")
    return {
        "server": server["label"], "workers": workers, "connections": connections,
        "rate_target": rate, "offered_rate": offered, "answered": answered, "rate": report["rate"],
        "errors": report["errors"], "server_cpu_s": cpu1 - cpu0,
        "cpu_us_per_answer": (cpu1 - cpu0) * 1e6 / max(answered, 1),
        "threads_per_answer": per_answer_by_thread(threads0, threads1, answered),
        "server_cpu_util": server_util, "load_cpu_util": load_util, "load_bound": load_bound,
        "load_busiest_thread": gen.get("busiest_thread"),
        "load_cpu_us_per_request": load_cpu * 1e6 / max(report["sent"], 1),
        "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "p999": lat["p999"], "max": lat["max"],
        "ccr_u_answered": updates, "write_bytes": io1 - io0,
        "disk_bytes_per_ccr_u": (io1 - io0) / updates if updates else None,
        "data_dir_growth": size1 - size0,
        "file_bytes_per_ccr_u": (size1 - size0) / updates if updates else None,
        "allocations": int(allocs) if allocs is not None else None,
        "fsyncs": int(dur["syncs"]) if "syncs" in dur else None,
        "records_per_commit": float(dur["records_per_commit"]) if "records_per_commit" in dur else None,
        "send_lag_us": lag, "notes": notes, **admin.fields(), "load_report": report,
    }


def is_load_bound(load_util, busiest_thread, server_util):
    """The generator, not the server, set the pace: gyro load's CPUs (or its
    busiest load thread) busy LOAD_BOUND or more while the server was below
    SERVER_SATURATED of its CPUs."""
    return max(load_util, busiest_thread or 0.0) >= LOAD_BOUND and server_util < SERVER_SATURATED


def allocations_per_request(args, server, binary, load_gyro, workers, connections):
    """Steady-state allocations per request: two runs of different length,
    the difference of their allocation counts over that of their requests."""
    short, long_ = (measure(args, server, binary, load_gyro, workers, connections, count=n)
                    for n in (args.alloc_requests // 10, args.alloc_requests))
    if short["allocations"] is None or long_["allocations"] is None:
        return None
    d_req = long_["answered"] - short["answered"]
    return (long_["allocations"] - short["allocations"]) / d_req if d_req > 0 else None


def fmt_us(us):
    if us is None:
        return "-"
    if us >= 1_000_000:
        return f"{us / 1e6:.2f} s"
    if us >= 1000:
        return f"{us / 1000:.1f} ms"
    return f"{us} us"


def print_table(args, rows):
    if args.rate_of_max:
        mode = f"closed loop, then open loop at {args.rate_of_max:.0%} of each closed-loop rate"
    elif args.rate:
        mode = f"open loop at {args.rate:.0f} req/s"
    else:
        mode = "closed loop"
    extra = f", config {' '.join(args.config_extra)}" if args.config_extra else ""
    if args.warmup:
        extra += f", latency without each run's first {args.warmup}"
    print(f"{args.scenario} scenario, {mode}, {args.duration if not args.count else args.count} per run, "
          f"server on CPUs {args.server_cpus or 'any'}, gyro load on CPUs {args.load_cpus or 'any'}{extra}\n")
    open_loop = bool(args.rate or args.rate_of_max)
    cols = ["server", "workers", "conns"]
    if open_loop:
        cols += ["asked/s", "offered/s", "send lag p99"]
    cols += ["answers/s", "server CPU us/answer", "p50", "p99", "p99.9",
             "max", "disk B/CCR-U (write_bytes)", "file B/CCR-U (data dir growth)"]
    if args.allocations:
        cols.append("allocs/request")
    if args.threads:
        cols.append("server threads: us/answer (switches/answer)")
    if args.scrape_metrics:
        cols.append("scrapes")
    if args.top_ups:
        cols += ["top-ups", "top-up p50", "top-up p99"]
    cols.append("notes")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r["server"], str(r["workers"]), str(r["connections"])]
        if open_loop:
            asked, offered, lag = r["rate_target"], r["offered_rate"], r["send_lag_us"]
            cells += [f"{asked:,.0f}" if asked else "closed loop",
                      f"{offered:,.0f}" if offered is not None else "-",
                      fmt_us(lag["p99"]) if lag else "-"]
        if r["load_bound"]:
            cells += ["-"] * (len(cols) - len(cells) - 1)
        else:
            disk, grown = r["disk_bytes_per_ccr_u"], r["file_bytes_per_ccr_u"]
            cells += [f"{r['rate']:,.0f}", f"{r['cpu_us_per_answer']:.2f}", fmt_us(r["p50"]),
                      fmt_us(r["p99"]), fmt_us(r["p999"]), fmt_us(r["max"]),
                      f"{disk:,.0f}" if disk is not None else "-",
                      f"{grown:,.0f}" if grown is not None else "-"]
            if args.allocations:
                a = r.get("allocations_per_request")
                cells.append(f"{a:.2f}" if a is not None else "-")
            if args.threads:
                cells.append(fmt_threads(r.get("threads_per_answer") or {}))
            if args.scrape_metrics:
                cells.append(str(r["scrapes"]))
            if args.top_ups:
                ms = lambda v: f"{v:.2f} ms" if v is not None else "-"
                cells += [str(r["top_ups"]), ms(r["top_up_p50_ms"]), ms(r["top_up_p99_ms"])]
        cells.append("; ".join(r["notes"]))
        print("| " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", nargs="+", default=["gyro-sync"], metavar="SERVER",
                    help="servers to run side by side (see above)")
    ap.add_argument("--gyro", help="gyro binary for gyro servers without @PATH and for gyro load "
                                   "(default: build the tree's)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--connections", type=int, nargs="+", default=[1, 50])
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--count", type=int, help="requests per run instead of --duration")
    ap.add_argument("--rate", type=float, help="open loop at this many requests/s over all connections")
    ap.add_argument("--rate-of-max", type=float, metavar="FRACTION",
                    help="run each row closed loop first, then open loop at this fraction of the "
                         "rate it reached (e.g. 0.5 for half the measured maximum)")
    ap.add_argument("--window", type=int, help="gyro load --window")
    ap.add_argument("--warmup", help="gyro load --warmup: leave the requests intended in the first "
                                     "WARMUP of each run (connections opening, sessions starting) "
                                     "out of the latency columns; the table header says so "
                                     "(default: none left out)")
    ap.add_argument("--scenario", default="data")
    ap.add_argument("--repeat", type=int, default=1, help="run the whole set this many times")
    ap.add_argument("--load-threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0", help="taskset CPU list for the server ('' = none)")
    ap.add_argument("--load-cpus", default="1", help="taskset CPU list for gyro load ('' = none)")
    ap.add_argument("--config-extra", nargs="+", default=[], metavar="SECTION.KEY=VALUE",
                    help="gyro config overrides, e.g. storage.snapshot_every_records=100000")
    ap.add_argument("--allocations", action="store_true",
                    help="add heap allocations per request (tree's gyro: built with "
                         "count-allocations; NAME@PATH: PATH must be such a build)")
    ap.add_argument("--alloc-requests", type=int, default=200_000,
                    help="requests of the long allocation run (the short one has a tenth)")
    ap.add_argument("--threads", action="store_true",
                    help="add a column with the server's CPU per answer by thread (workers "
                         "together) and their context switches per answer")
    ap.add_argument("--scrape-metrics", type=float, metavar="SECONDS",
                    help="fetch gyro's /metrics this often during each run")
    ap.add_argument("--top-ups", type=float, metavar="RATE",
                    help="top up demo accounts over gyro's admin API at this many per second "
                         "during each run, and report their latency")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON after the table")
    args = ap.parse_args()

    if args.gyro:
        gyro = os.path.abspath(args.gyro)
    else:
        subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro"], cwd=ROOT, check=True)
        gyro = os.path.join(ROOT, "target/release/gyro")
    servers = [parse_server(s, gyro) for s in args.servers]
    count_gyro = None
    if args.allocations and any(s["kind"] == "gyro" and not s["own_binary"] for s in servers):
        if args.gyro:
            count_gyro = gyro
        else:
            subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro",
                            "--features", "count-allocations"], cwd=ROOT, check=True)
            count_gyro = os.path.join(ROOT, "target/release/gyro-count")
            shutil.copy(os.path.join(ROOT, "target/release/gyro"), count_gyro)
            subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro"], cwd=ROOT, check=True)
    if any(s["kind"] == "gyserver" for s in servers):
        subprocess.run([os.path.join(ROOT, "interop/go-diameter/run.sh")], check=True)

    rows = []
    for _ in range(args.repeat):
        for w in args.workers:
            for c in args.connections:
                for s in servers:
                    binary = s.get("binary")
                    if args.rate_of_max:
                        top = measure(args, s, binary, gyro, w, c, args.count)
                        rows.append(top)
                        print(f"{s['label']} workers={w} conns={c} closed loop: {top['rate']:,.0f}/s",
                              file=sys.stderr)
                        rate = round(top["rate"] * args.rate_of_max)
                    else:
                        rate = args.rate
                    row = measure(args, s, binary, gyro, w, c, args.count, rate)
                    if args.allocations and s["kind"] == "gyro":
                        row["allocations_per_request"] = allocations_per_request(
                            args, s, binary if s["own_binary"] else count_gyro, gyro, w, c)
                    rows.append(row)
                    print(f"{s['label']} workers={w} conns={c}: {row['rate']:,.0f}/s, "
                          f"{row['cpu_us_per_answer']:.2f} us/answer", file=sys.stderr)
    print_table(args, rows)
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "load_report"} for r in rows], indent=2))


if __name__ == "__main__":
    main()
