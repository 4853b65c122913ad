#!/usr/bin/env python3
"""Measure gyro on the embedded store against gyro on a Redis Cluster, with
one and more gyro nodes, in one invocation, and estimate from the measured
per-CCR costs what 100,000 and 1,000,000 CCR/s would take.

Rows, run one after the other against the same cluster:

  embedded          one `gyro serve` with [storage] durability = "sync"
                    (--no-embedded leaves it out)
  redis-ackR xN     N `gyro serve` nodes (each of --gyro-nodes) sharing the
                    balances through the Redis Cluster ledger ([storage]
                    backend = "redis-cluster"), storage.redis.replicas_ack
                    = R (each of --replicas-ack)

    bench/redis_cluster.py                            # start a cluster, 10 s a row
    bench/redis_cluster.py --duration 10s --replicas-ack 0 1
    bench/redis_cluster.py --nodes redis://127.0.0.1:7380   # reuse a running cluster
    bench/redis_cluster.py --gyro-nodes 1 2 3 --server-cpus 0 1 2 --load-cpus 3 \\
        --redis-cpus 4-7                              # a bigger machine
    bench/redis_cluster.py --connections 8 --window 8 --rate 20000   # open loop
    bench/redis_cluster.py --targets 100000 1000000 --node-cores 32 --headroom 0.7

The cluster. Without --nodes the script starts a throw-away Redis Cluster
with scripts/redis-cluster.sh (three masters and three replicas on
127.0.0.1:--redis-port..+5, in a scratch directory; the script installs
Debian's redis-server when missing) and stops it at the end, also on
failure or Ctrl-C. With --nodes SEED... it uses a running cluster and
leaves it running. Each Redis row gets a namespace of its own (fresh
accounts: the charging configuration's are created at the first node's
start) whose keys are deleted once its nodes have stopped, so rows do not
inherit each other's sessions, remembered answers or CDR streams. The
script's own probes of the cluster (CLUSTER NODES, INFO, SCAN, UNLINK)
speak plain RESP without AUTH or TLS: --nodes must name such a cluster.

Every gyro node is `gyro serve` (with --workers) with the built-in demo
charging configuration (1,000 accounts on 46700000000..46700000999), its
own scratch data directory (CDR files) and admin port (for /metrics), and
a node_id and Origin-Host of its own. Each node gets one `gyro load`
(--connections, --window, the data scenario by default, over the same
1,000 subscribers, each load with its own Origin-Host so Session-Ids do
not collide); all loads of a row start at once. Closed loop by default;
--rate R is open loop at R requests/s over all nodes (R / N each).

Pinning (taskset): node i runs on the i-th list of --server-cpus (the last
list for the rest), every `gyro load` on --load-cpus, and with
--redis-cpus every redis-server process of the cluster is pinned there for
the run (and given back its former CPUs at the end). Where there are too
few CPUs to keep them apart (a two-core machine) the figures are still
CPU time per answer, but the parts slow each other down: say so with
the table.

Columns, per row:
  answers/s           all nodes' answers (sum of each load's rate)
  gyro CPU us/answer  user+sys of every gyro node process (/proc/<pid>/stat)
                      over the answers
  Redis CPU us/answer user+sys of every redis-server process of the
                      cluster, masters and replicas (/proc/<pid>/stat where
                      the process is on this machine, else INFO cpu), over
                      the answers; also split master / replica in --json
  steps/CCR           Redis Function calls (gyro_redis_steps_total)
  pipelines/CCR       pipelines sent, one per master per group commit
                      (gyro_redis_pipelines_total)
  round trips/CCR     group commits that went to the cluster, each a
                      concurrent fan-out of those pipelines
                      (gyro_redis_round_trip_seconds_count)
  Redis cmds/CCR      commands the masters ran (INFO stats
                      total_commands_processed, which counts the commands
                      each function runs as well as the FCALL): the steps'
                      work, session records, WAIT, and the expiry and
                      export rounds (which poll every slot, a fixed cost
                      per node that weighs most at low rates); --json
                      adds them by command (`redis_calls_per_ccr`) with
                      the masters' time in each (`redis_usec_per_ccr`,
                      INFO commandstats: an FCALL's time includes that of
                      the commands it runs)
  p50, p99            latency over all nodes' requests (their percentile
                      curves merged)
  errors              requests not answered 2001 or not answered in time
  notes               errors, a node that died, Redis step errors, and
                      "machine saturated" when gyro, Redis and gyro load
                      together kept 90 % or more of the machine's CPUs
                      busy (the costs per answer still hold; the rate is
                      what this machine could do, not what gyro can)

The counters come from each node's /metrics before and after the load, so
start-up (creating the accounts) is not counted; the CPU figures cover the
same interval. A row whose load generator was the bottleneck is marked
LOAD-BOUND (bench/server.py's rule) and shows no numbers.

The estimate below the table takes each row's measured per-CCR costs and
asks what a target rate needs with every process at --headroom (70 %) of
its CPU: gyro cores = rate x gyro CPU per answer / headroom (nodes: of
--node-cores each), and Redis master+replica pairs = rate x the larger of
the masters' and the replicas' CPU per answer / headroom (each Redis
executes commands on one core, so a master is one core; at least three
masters, the smallest Redis Cluster). It assumes the costs per CCR stay
what they were here (same CPU, same batch sizes; with more masters a
group commit is cut into more, smaller pipelines, which costs more per
CCR), the accounts spread evenly over the slots, gyro scaling linearly
with its workers, and nothing for the network (loopback here).

Builds the tree's gyro first (cargo build --release -p gyro) unless --gyro
names a binary; that binary also runs the load.
"""

import argparse
import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as bench  # noqa: E402

ROOT = bench.ROOT
CLUSTER_SCRIPT = os.path.join(ROOT, "scripts/redis-cluster.sh")
REDIS_COUNTERS = {
    "steps": "gyro_redis_steps_total",
    "pipelines": "gyro_redis_pipelines_total",
    "round_trips": "gyro_redis_round_trip_seconds_count",
    "redis_errors": "gyro_redis_errors_total",
    "session_lookups": "gyro_redis_session_lookups_total",
    "replayed": "gyro_redis_replayed_steps_total",
}


# ---------------------------------------------------------------- Redis probes


class RedisError(Exception):
    """An error reply, or a node that cannot be reached."""


class Redis:
    """A minimal RESP2 client: enough for CLUSTER NODES, INFO, SCAN and
    UNLINK on one node (no AUTH, no TLS, no redirections)."""

    def __init__(self, host, port, timeout=10):
        try:
            self.sock = socket.create_connection((host, port), timeout)
        except OSError as e:
            raise RedisError(f"{host}:{port}: {e}") from e
        self.file = self.sock.makefile("rb")

    def close(self):
        self.file.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def pipeline(self, commands):
        """Sends every command at once and returns their replies (an error
        reply as a RedisError in its place)."""
        self.sock.sendall(b"".join(encode_command(c) for c in commands))
        return [read_reply(self.file) for _ in commands]

    def call(self, *args):
        reply = self.pipeline([args])[0]
        if isinstance(reply, RedisError):
            raise reply
        return reply


def encode_command(args):
    """One command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def read_reply(f):
    """One RESP2 reply from the binary file `f` (bulk strings as bytes)."""
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise RedisError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RedisError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise RedisError(f"unexpected reply {line!r}")


def parse_seed(seed):
    """(host, port) of a seed as gyro's storage.redis.nodes takes it:
    `redis://[user@]host:port`, `rediss://...` or `host:port`."""
    s = seed.strip()
    for scheme in ("redis://", "rediss://"):
        if s.startswith(scheme):
            s = s[len(scheme):]
    s = s.rsplit("@", 1)[-1].split("/", 1)[0]
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"seed {seed!r}: expected host:port or redis://host:port")
    return host.strip("[]"), int(port)


def parse_cluster_nodes(text):
    """CLUSTER NODES as [{"host", "port", "role"}] (role "master" or
    "replica"), leaving out nodes marked failed or without an address."""
    nodes = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        addr, flags = parts[1].split("@", 1)[0], parts[2].split(",")
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit() or "fail" in flags or "noaddr" in flags:
            continue
        role = "master" if "master" in flags else "replica"
        nodes.append({"host": host, "port": int(port), "role": role})
    return nodes


def parse_info(text):
    """INFO's `key:value` lines as a dict of strings."""
    info = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    return info


def as_text(reply):
    return reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)


def cluster_nodes(seeds):
    """Every node of the cluster, from the first seed that answers."""
    last = None
    for seed in seeds:
        try:
            host, port = parse_seed(seed)
            with Redis(host, port) as r:
                nodes = parse_cluster_nodes(as_text(r.call("CLUSTER", "NODES")))
            if nodes:
                return nodes
        except (RedisError, ValueError, OSError) as e:
            last = e
    sys.exit(f"no seed of {' '.join(seeds)} answered CLUSTER NODES: {last}")


def local_redis_pid(pid):
    """`pid` when it is a redis-server process on this machine, else None."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return pid if f.read().startswith("redis") else None
    except OSError:
        return None


def redis_snapshot(nodes):
    """Per node: CPU seconds (user+sys) and commands processed so far."""
    snap = []
    for n in nodes:
        with Redis(n["host"], n["port"]) as r:
            info = parse_info(as_text(r.call("INFO", "all")))
        pid = local_redis_pid(int(info.get("process_id", 0))) if n["host"] in (
            "127.0.0.1", "localhost", "::1") else None
        if pid:
            cpu = bench.cpu_seconds(pid)
        else:
            cpu = float(info.get("used_cpu_user", 0)) + float(info.get("used_cpu_sys", 0))
        snap.append({**n, "pid": pid, "cpu": cpu,
                     "commands": int(info.get("total_commands_processed", 0)),
                     "calls": command_stats(info)})
    return snap


def command_stats(info):
    """Calls and microseconds by command from INFO commandstats
    (`cmdstat_<name>:calls=N,usec=U,...`; the commands a function runs
    count there too): {name: (calls, usec)}."""
    stats = {}
    for k, v in info.items():
        if k.startswith("cmdstat_"):
            fields = dict(f.partition("=")[::2] for f in v.split(","))
            try:
                stats[k[len("cmdstat_"):]] = (int(fields["calls"]), int(fields["usec"]))
            except (KeyError, ValueError):
                continue
    return stats


def redis_delta(before, after):
    """CPU seconds of masters and replicas, and the masters' commands,
    between two snapshots of the same nodes."""
    out = {"master_cpu": 0.0, "replica_cpu": 0.0, "master_commands": 0, "master_calls": {},
           "master_usec": {}}
    for b, a in zip(before, after):
        key = "master_cpu" if b["role"] == "master" else "replica_cpu"
        out[key] += a["cpu"] - b["cpu"]
        if b["role"] == "master":
            out["master_commands"] += a["commands"] - b["commands"]
            for name, (n, usec) in a.get("calls", {}).items():
                n0, usec0 = b.get("calls", {}).get(name, (0, 0))
                if n - n0:
                    out["master_calls"][name] = out["master_calls"].get(name, 0) + n - n0
                    out["master_usec"][name] = out["master_usec"].get(name, 0) + usec - usec0
    return out


def delete_namespace(nodes, namespace):
    """Deletes every key of `namespace` on the cluster's masters; returns
    how many."""
    deleted = 0
    for n in nodes:
        if n["role"] != "master":
            continue
        with Redis(n["host"], n["port"]) as r:
            cursor = b"0"
            while True:
                cursor, keys = r.call("SCAN", cursor, "MATCH", f"{namespace}:*", "COUNT", 1000)
                if keys:
                    r.pipeline([("UNLINK", k) for k in keys])
                    deleted += len(keys)
                if cursor in (b"0", "0"):
                    break
    return deleted


def taskset_pids(pids, cpus):
    """Pins every thread of each process to `cpus`; returns their former
    CPU lists (pid -> list)."""
    former = {}
    for pid in pids:
        out = subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True,
                             text=True)
        for line in out.stdout.splitlines():
            if line.startswith("pid ") and "current affinity list:" in line:
                former.setdefault(pid, line.rsplit(":", 1)[1].strip())
    return former


class Cluster:
    """The Redis Cluster the rows run on: started here (and stopped at
    the end) or reused from --nodes."""

    def __init__(self, args):
        self.args, self.started, self.dir = args, False, None
        self.owned = not args.nodes
        self.former_cpus = {}
        if args.nodes:
            self.seeds = list(args.nodes)
        else:
            self.start()
        try:
            self.nodes = cluster_nodes(self.seeds)
        except SystemExit:
            self.stop()
            raise

    def env(self):
        return dict(os.environ, GYRO_REDIS_DIR=self.dir, GYRO_REDIS_PORT=str(self.args.redis_port))

    def start(self):
        port = self.args.redis_port
        for p in range(port, port + 6):
            try:
                socket.create_connection(("127.0.0.1", p), 0.2).close()
                sys.exit(f"port {p} is taken: start the cluster on other ports (--redis-port) "
                         f"or reuse a running one (--nodes redis://127.0.0.1:{p})")
            except OSError:
                pass
        self.dir = tempfile.mkdtemp(prefix="gyro-bench-redis-")
        out = subprocess.run([CLUSTER_SCRIPT, "start"], env=self.env(), capture_output=True,
                             text=True)
        self.started = True
        if out.returncode != 0:
            self.stop()
            sys.exit(f"scripts/redis-cluster.sh start failed:\n{out.stderr}")
        self.seeds = [line for line in out.stdout.split() if line.startswith("redis://")]

    def pin(self, cpus):
        pids = [s["pid"] for s in redis_snapshot(self.nodes) if s["pid"]]
        self.former_cpus = taskset_pids(pids, cpus)

    def stop(self):
        for pid, cpus in self.former_cpus.items():
            subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True)
        self.former_cpus = {}
        if self.started:
            subprocess.run([CLUSTER_SCRIPT, "stop"], env=self.env(), capture_output=True)
            shutil.rmtree(self.dir, ignore_errors=True)
            self.started = False


# ---------------------------------------------------------------- gyro nodes


def parse_metrics(text):
    """Prometheus text exposition as {name{labels}: value}, comments left
    out."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(metrics, name):
    """The sum of family `name` over its labels (0 when absent)."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def redis_counters(metrics):
    """The gyro_redis_* counters this script reports, from parsed /metrics."""
    return {k: metric_sum(metrics, name) for k, name in REDIS_COUNTERS.items()}


def scrape(admin_port):
    """A node's /metrics, parsed (empty when it cannot be read)."""
    import http.client
    try:
        conn = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=10)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode(errors="replace")
        conn.close()
        return parse_metrics(body) if r.status == 200 else {}
    except (OSError, http.client.HTTPException):
        return {}


def node_config(index, admin_port, row, seeds, namespace, extras):
    """The gyro configuration of node `index` of `row`: its Origin-Host
    and node_id, admin port, the storage of the row, then each
    `section.key=value` of `extras` (replacing a key set here)."""
    sections = {
        "server": {"origin_host": json.dumps(f"n{index + 1}.bench.gyro.test")},
        "admin": {"listen": json.dumps(f"127.0.0.1:{admin_port}")},
    }
    if row["backend"] == "embedded":
        sections["storage"] = {"durability": '"sync"'}
    else:
        sections["storage"] = {"backend": '"redis-cluster"'}
        sections["storage.redis"] = {
            "nodes": "[" + ", ".join(json.dumps(s) for s in seeds) + "]",
            "namespace": json.dumps(namespace),
            "node_id": json.dumps(f"bench-n{index + 1}"),
            "replicas_ack": str(row["replicas_ack"]),
        }
    for e in extras:
        key, _, value = e.partition("=")
        section, _, name = key.strip().rpartition(".")
        if not section or not name or not value:
            raise ValueError(f"--config-extra {e!r}: expected section.key=value")
        sections.setdefault(section, {})[name] = bench.toml_value(value)
    return "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items())
                   for s, kv in sections.items())


def cpus_of_node(server_cpus, index):
    """Node `index`'s taskset list: the index-th of --server-cpus, or the
    last one ('' = not pinned)."""
    if not server_cpus:
        return ""
    return server_cpus[min(index, len(server_cpus) - 1)]


def plan_rows(args):
    """The rows to run, in order."""
    rows = [] if args.no_embedded else [{"label": "embedded (sync)", "backend": "embedded",
                                         "nodes": 1, "replicas_ack": None}]
    for ack in args.replicas_ack:
        for n in args.gyro_nodes:
            rows.append({"label": f"redis-ack{ack} x{n}", "backend": "redis", "nodes": n,
                         "replicas_ack": ack})
    return rows


def merged_percentile(reports, p):
    """The p-th latency percentile (us) over every load report's requests:
    their percentile curves (`latency_distribution`) weighted by their
    answers. None when no report has a curve."""
    curves = []
    for r in reports:
        pts = sorted((d["latency_us"], d["percentile"]) for d in r.get("latency_distribution") or [])
        if pts and r.get("answered"):
            curves.append((r["answered"], pts))
    if not curves:
        return None
    total = sum(w for w, _ in curves)

    def below(x):
        f = 0.0
        for w, pts in curves:
            share = 0.0
            for lat, pct in pts:
                if lat > x:
                    break
                share = pct
            f += w * share / 100
        return f / total

    for x in sorted({lat for _, pts in curves for lat, _ in pts}):
        if below(x) >= p / 100 - 1e-9:
            return x
    return max(lat for _, pts in curves for lat, _ in pts)


def start_node(binary, index, row, args, seeds, namespace, workdir):
    """One gyro node of `row`, started and listening; (process, port,
    admin port, its directory)."""
    d = os.path.join(workdir, f"n{index + 1}")
    os.makedirs(d)
    port, admin_port = bench.free_port(), bench.free_port()
    cfg = os.path.join(d, "gyro.toml")
    with open(cfg, "w") as f:
        f.write(node_config(index, admin_port, row, seeds, namespace, args.config_extra))
    cmd = [binary, "serve", "--workers", str(args.workers), "--listen", f"127.0.0.1:{port}",
           "--data-dir", os.path.join(d, "data"), "--config", cfg]
    cpus = cpus_of_node(args.server_cpus, index)
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    log = open(os.path.join(d, "server.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                         env=dict(os.environ, GYRO_LOG="info"))
    log.close()
    if not bench.wait_port(port, p):
        p.kill()
        p.wait()
        with open(log.name, errors="replace") as f:
            raise RuntimeError(f"{row['label']} node {index + 1} did not start:\n"
                               + f.read()[-2000:])
    return p, port, admin_port, d


def load_command(gyro, port, index, args, rate):
    cmd = [gyro, "load", "--target", f"127.0.0.1:{port}", "--connections",
           str(args.connections), "--threads", str(args.load_threads), "--scenario",
           args.scenario, "--origin-host", f"load{index + 1}.bench.gyro.test", "--json",
           "--quiet", "--max-error-ratio", "1", "--duration", args.duration]
    if args.window:
        cmd += ["--window", str(args.window)]
    if rate:
        cmd += ["--rate", str(rate)]
    if args.warmup:
        cmd += ["--warmup", args.warmup]
    if args.load_cpus:
        cmd = ["taskset", "-c", args.load_cpus] + cmd
    return cmd


def measure(args, gyro, cluster, row, index):
    """One row: its nodes started, one `gyro load` per node at once, the
    figures between just before and just after the loads."""
    namespace = f"bench{os.getpid()}r{index}"
    workdir = tempfile.mkdtemp(prefix="gyro-bench-redis-row-")
    nodes = []
    redis = row["backend"] == "redis"
    try:
        for i in range(row["nodes"]):
            nodes.append(start_node(gyro, i, row, args, cluster.seeds if redis else [], namespace,
                                    workdir))
        m0 = [scrape(n[2]) for n in nodes]
        c0 = [bench.cpu_seconds(n[0].pid) for n in nodes]
        r0 = redis_snapshot(cluster.nodes) if redis else None
        rate = args.rate / row["nodes"] if args.rate else None
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        loads = [subprocess.Popen(load_command(gyro, n[1], i, args, rate), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for i, n in enumerate(nodes)]
        outs = [p.communicate() for p in loads]
        wall = time.time() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        c1 = [bench.cpu_seconds(n[0].pid) for n in nodes]
        r1 = redis_snapshot(cluster.nodes) if redis else None
        m1 = [scrape(n[2]) for n in nodes]
        alive = all(n[0].poll() is None for n in nodes)
        reports = []
        for p, (out, err) in zip(loads, outs):
            if p.returncode not in (0, 1):
                raise RuntimeError(f"gyro load failed: {err[-2000:]}")
            reports.append(json.loads(out))
    finally:
        for n in nodes:
            if n[0].poll() is None:
                n[0].terminate()
        for n in nodes:
            try:
                n[0].wait(timeout=60)
            except subprocess.TimeoutExpired:
                n[0].kill()
                n[0].wait()
        deleted = delete_namespace(cluster.nodes, namespace) if redis else 0
        shutil.rmtree(workdir, ignore_errors=True)
    load_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return summarize(args, row, reports, sum(c1) - sum(c0), wall, load_cpu,
                     [redis_counters(m) for m in m0], [redis_counters(m) for m in m1],
                     redis_delta(r0, r1) if redis else None, alive, deleted)


def summarize(args, row, reports, gyro_cpu, wall, load_cpu, counters0, counters1, rd, alive,
              deleted=0):
    """The row's figures from what was measured (pure: no I/O)."""
    answered = sum(r["answered"] for r in reports)
    per = max(answered, 1)
    out = {**row, "workers": args.workers, "connections": args.connections,
           "window": args.window, "answered": answered,
           "rate": sum(r["rate"] for r in reports), "errors": sum(r["errors"] for r in reports),
           "gyro_cpu_s": gyro_cpu, "gyro_cpu_us_per_answer": gyro_cpu * 1e6 / per,
           "p50": merged_percentile(reports, 50), "p99": merged_percentile(reports, 99),
           "per_node_rate": [r["rate"] for r in reports], "wall_s": wall,
           "redis_keys_deleted": deleted}
    if rd is not None:
        d = {k: sum(c1[k] - c0[k] for c0, c1 in zip(counters0, counters1))
             for k in REDIS_COUNTERS}
        out.update({
            "redis_cpu_us_per_answer": (rd["master_cpu"] + rd["replica_cpu"]) * 1e6 / per,
            "redis_master_cpu_us_per_answer": rd["master_cpu"] * 1e6 / per,
            "redis_replica_cpu_us_per_answer": rd["replica_cpu"] * 1e6 / per,
            "steps_per_ccr": d["steps"] / per, "pipelines_per_ccr": d["pipelines"] / per,
            "round_trips_per_ccr": d["round_trips"] / per,
            "redis_commands_per_ccr": rd["master_commands"] / per,
            "redis_calls_per_ccr": {k: v / per for k, v in sorted(
                rd["master_calls"].items(), key=lambda kv: -kv[1])},
            "redis_usec_per_ccr": {k: v / per for k, v in sorted(
                rd.get("master_usec", {}).items(), key=lambda kv: -kv[1])},
            "steps_per_round_trip": d["steps"] / d["round_trips"] if d["round_trips"] else None,
            "redis_step_errors": d["redis_errors"], "session_lookups": d["session_lookups"],
            "replayed_steps": d["replayed"],
        })
    notes = []
    if not alive:
        notes.append("a node died")
    if out["errors"]:
        notes.append(f"{out['errors']} errors")
    if rd is not None and out["redis_step_errors"]:
        notes.append(f"{out['redis_step_errors']:.0f} Redis step errors")
    offered = sum(r.get("offered_rate") or 0 for r in reports)
    if args.rate and offered < 0.97 * args.rate:
        notes.append(f"offered only {offered:,.0f}/s of the {args.rate:,.0f}/s asked")
    server_cpus = sum(bench.cpu_count(cpus_of_node(args.server_cpus, i))
                      for i in range(row["nodes"])) if args.server_cpus else bench.cpu_count("")
    server_util = gyro_cpu / (wall * server_cpus) if wall else 0.0
    load_util = load_cpu / (wall * bench.cpu_count(args.load_cpus)) if wall else 0.0
    busiest = max(((r.get("generator") or {}).get("busiest_thread") or 0.0) for r in reports)
    out["load_bound"] = bench.is_load_bound(load_util, busiest, server_util)
    if out["load_bound"]:
        notes.append(f"LOAD-BOUND: gyro load at {load_util:.0%} of its CPUs (busiest load "
                     f"thread {busiest:.0%}), gyro at {server_util:.0%}: not reported")
    redis_cpu = rd["master_cpu"] + rd["replica_cpu"] if rd is not None else 0.0
    busy = (gyro_cpu + redis_cpu + load_cpu) / wall if wall else 0.0
    if busy >= 0.9 * (os.cpu_count() or 1):
        notes.append(f"machine saturated: gyro, Redis and gyro load kept {busy:.1f} of its "
                     f"{os.cpu_count()} CPUs busy")
    out.update(gyro_cpu_util=server_util, load_cpu_util=load_util, cpus_busy=busy,
               redis_cpus_busy=redis_cpu / wall if wall else 0.0, notes=notes)
    return out


# ---------------------------------------------------------------- the estimate


def estimate(row, rate, headroom, node_cores):
    """What `rate` CCR/s needs at the per-CCR costs of `row`, each process
    at `headroom` of its CPU: gyro cores and nodes of `node_cores`, and
    Redis master+replica pairs (None for the embedded store)."""
    cores = rate * row["gyro_cpu_us_per_answer"] / 1e6 / headroom
    out = {"rate": rate, "gyro_cores": cores, "gyro_nodes": max(1, math.ceil(cores / node_cores))}
    if row["backend"] == "redis":
        per_process = max(row["redis_master_cpu_us_per_answer"],
                          row["redis_replica_cpu_us_per_answer"])
        out["redis_cores_per_role"] = rate * per_process / 1e6 / headroom
        out["redis_pairs"] = max(3, math.ceil(out["redis_cores_per_role"] - 1e-9))
    return out


def print_estimate(args, rows):
    print(f"\nPaper estimate from each row's measured per-CCR costs, every process at "
          f"{args.headroom:.0%} of its CPU, gyro nodes of {args.node_cores} cores:\n")
    cols = ["row", "CCR/s", "gyro cores", "gyro nodes", "Redis master+replica pairs"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        if r["load_bound"] or not r["answered"]:
            continue
        for target in args.targets:
            e = estimate(r, target, args.headroom, args.node_cores)
            nodes = f"{e['gyro_nodes']}" if r["backend"] == "redis" else (
                "1 (one machine holds every balance)" if e["gyro_cores"] <= args.node_cores
                else "does not fit one machine")
            pairs = str(e["redis_pairs"]) if "redis_pairs" in e else "-"
            print(f"| {r['label']} | {target:,.0f} | {e['gyro_cores']:,.1f} | {nodes} | {pairs} |")
    print("\nAssumes: the costs per CCR measured here hold at that rate (same CPU, same batch "
          "sizes; more masters cut a group commit into more, smaller pipelines, which costs "
          "more per CCR than measured), accounts spread evenly over the hash slots, gyro "
          "scaling linearly with its workers, one core per Redis process (commands run on "
          "one thread; a replica needs one too), at least three masters, and no network "
          "cost (loopback here).")


# ---------------------------------------------------------------- output


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def print_table(args, rows, cluster):
    mode = f"open loop at {args.rate:,.0f} req/s over all nodes" if args.rate else "closed loop"
    where = (f"gyro nodes on CPUs {' / '.join(args.server_cpus) or 'any'}, gyro load on CPUs "
             f"{args.load_cpus or 'any'}, Redis on CPUs {args.redis_cpus or 'any'}")
    redis = (f"Redis Cluster of {sum(n['role'] == 'master' for n in cluster.nodes)} masters and "
             f"{sum(n['role'] == 'replica' for n in cluster.nodes)} replicas "
             f"({'started for this run' if cluster.owned else 'reused'})")
    print(f"{args.scenario} scenario, {mode}, {args.duration} per row, {args.workers} worker(s) "
          f"per node, {args.connections} connections x window {args.window or 'default'} per "
          f"node; {redis}; {where}; {os.cpu_count()} CPUs on this machine\n")
    cols = ["row", "gyro nodes", "answers/s", "gyro CPU us/answer", "Redis CPU us/answer",
            "steps/CCR", "pipelines/CCR", "round trips/CCR", "Redis cmds/CCR", "p50", "p99",
            "errors", "notes"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r["label"], str(r["nodes"])]
        if r["load_bound"]:
            cells += ["-"] * (len(cols) - 3)
        else:
            cells += [f"{r['rate']:,.0f}", fmt(r["gyro_cpu_us_per_answer"]),
                      fmt(r.get("redis_cpu_us_per_answer")), fmt(r.get("steps_per_ccr")),
                      fmt(r.get("pipelines_per_ccr")), fmt(r.get("round_trips_per_ccr"), ".3f"),
                      fmt(r.get("redis_commands_per_ccr")), bench.fmt_us(r["p50"]),
                      bench.fmt_us(r["p99"]), str(r["errors"])]
        cells.append("; ".join(r["notes"]))
        print("| " + " | ".join(cells) + " |")


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, and each option's default (where it
    has one its help does not already give)."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--gyro", help="gyro binary for the nodes and the load (default: build the "
                                   "tree's release build)")
    ap.add_argument("--nodes", nargs="+", metavar="SEED",
                    help="reuse this running Redis Cluster (seeds as in storage.redis.nodes); "
                         "default: start one with scripts/redis-cluster.sh and stop it after")
    ap.add_argument("--redis-port", type=int, default=7480,
                    help="first port of the cluster started here (six ports from it)")
    ap.add_argument("--gyro-nodes", type=int, nargs="+", default=[1, 2], metavar="N",
                    help="gyro node counts of the Redis rows")
    ap.add_argument("--replicas-ack", type=int, nargs="+", default=[1], choices=[0, 1],
                    help="storage.redis.replicas_ack of the Redis rows (each value a set of rows)")
    ap.add_argument("--no-embedded", action="store_true", help="leave out the embedded-store row")
    ap.add_argument("--workers", type=int, default=1, help="gyro serve --workers of every node")
    ap.add_argument("--connections", type=int, default=16, help="gyro load connections per node")
    ap.add_argument("--window", type=int, default=16, help="gyro load --window (0: its default)")
    ap.add_argument("--duration", default="10s", help="gyro load --duration of every row")
    ap.add_argument("--rate", type=float,
                    help="open loop at this many requests/s over all nodes of a row")
    ap.add_argument("--warmup", help="gyro load --warmup (latency without the run's start)")
    ap.add_argument("--scenario", default="data")
    ap.add_argument("--load-threads", type=int, default=1, help="gyro load --threads")
    ap.add_argument("--server-cpus", nargs="*", default=["0"], metavar="CPUS",
                    help="taskset list of node 1, node 2, ... (the last for the rest; none "
                         "given: not pinned)")
    ap.add_argument("--load-cpus", default="1", help="taskset list of every gyro load ('' = none)")
    ap.add_argument("--redis-cpus", default="",
                    help="pin every redis-server of the cluster to this taskset list for the "
                         "run ('' = leave them be)")
    ap.add_argument("--config-extra", nargs="+", default=[], metavar="SECTION.KEY=VALUE",
                    help="gyro config overrides for every node, e.g. "
                         "storage.redis.export_interval_ms=5000")
    ap.add_argument("--targets", type=float, nargs="+", default=[100_000, 1_000_000],
                    metavar="CCR_PER_S", help="rates the estimate is made for")
    ap.add_argument("--headroom", type=float, default=0.7,
                    help="share of each CPU the estimate plans to use")
    ap.add_argument("--node-cores", type=int, default=16, help="cores of one gyro node (estimate)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON after the table")
    args = ap.parse_args(argv)
    if not 0 < args.headroom <= 1:
        ap.error("--headroom must be in (0, 1]")
    if any(n < 1 for n in args.gyro_nodes) or args.workers < 1 or args.connections < 1:
        ap.error("--gyro-nodes, --workers and --connections must be at least 1")
    if args.node_cores < 1:
        ap.error("--node-cores must be at least 1")
    for e in args.config_extra:
        key, _, value = e.partition("=")
        if not key.strip().rpartition(".")[0] or not value:
            ap.error(f"--config-extra {e!r}: expected section.key=value")
    if args.nodes:
        for s in args.nodes:
            try:
                parse_seed(s)
            except ValueError as err:
                ap.error(str(err))
    args.window = args.window or None
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.gyro:
        gyro = os.path.abspath(args.gyro)
    else:
        subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro"], cwd=ROOT,
                       check=True)
        gyro = os.path.join(ROOT, "target/release/gyro")
    cluster = Cluster(args)
    rows = []
    try:
        if args.redis_cpus:
            cluster.pin(args.redis_cpus)
        for i, row in enumerate(plan_rows(args)):
            r = measure(args, gyro, cluster, row, i)
            rows.append(r)
            print(f"{r['label']}: {r['rate']:,.0f}/s, gyro {r['gyro_cpu_us_per_answer']:.2f} "
                  f"us/answer, Redis {fmt(r.get('redis_cpu_us_per_answer'))} us/answer",
                  file=sys.stderr)
    except KeyboardInterrupt:
        failed = "interrupted"
    except (RuntimeError, RedisError, OSError) as e:
        failed = str(e)
    else:
        failed = None
    finally:
        cluster.stop()
    if failed:
        print(f"stopped early: {failed}", file=sys.stderr)
    print_table(args, rows, cluster)
    print_estimate(args, rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
