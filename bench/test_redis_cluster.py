#!/usr/bin/env python3
"""Tests of bench/redis_cluster.py's pure parts: /metrics and Redis reply
parsing, the node configuration, merged latency percentiles, the row's
figures, the sizing estimate and argument handling. No cluster, no gyro:
they run in milliseconds.

    python3 bench/test_redis_cluster.py
"""

import contextlib
import io
import os
import sys
import tomllib
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_cluster as rc  # noqa: E402

METRICS = """\
# HELP gyro_redis_steps Money steps sent to the Redis Cluster.
# TYPE gyro_redis_steps counter
gyro_redis_steps_total 8976
# TYPE gyro_redis_pipelines counter
gyro_redis_pipelines_total 588
# TYPE gyro_redis_round_trip_seconds histogram
gyro_redis_round_trip_seconds_sum 1.796555664
gyro_redis_round_trip_seconds_count 196
gyro_redis_round_trip_seconds_bucket{le="0.005"} 35
gyro_redis_round_trip_seconds_bucket{le="+Inf"} 196
gyro_redis_errors_total{kind="unavailable"} 2
gyro_redis_errors_total{kind="not_replicated"} 1
gyro_redis_errors_total{kind="refused"} 0
gyro_redis_session_lookups_total 4
gyro_redis_replayed_steps_total 0
# EOF
"""


def report(answered, rate, curve, errors=0, busiest=0.1, offered=None):
    return {"answered": answered, "rate": rate, "errors": errors, "offered_rate": offered,
            "generator": {"busiest_thread": busiest},
            "latency_distribution": [{"percentile": p, "latency_us": us} for p, us in curve]}


class Metrics(unittest.TestCase):
    def test_the_redis_counters_are_read_from_the_exposition(self):
        m = rc.parse_metrics(METRICS)
        self.assertEqual(m["gyro_redis_round_trip_seconds_bucket{le=\"+Inf\"}"], 196)
        c = rc.redis_counters(m)
        self.assertEqual(c, {"steps": 8976, "pipelines": 588, "round_trips": 196,
                             "redis_errors": 3, "session_lookups": 4, "replayed": 0})

    def test_a_family_is_not_confused_with_a_longer_name(self):
        m = rc.parse_metrics("gyro_redis_steps_total 5\ngyro_redis_steps_total_x 7\n")
        self.assertEqual(rc.metric_sum(m, "gyro_redis_steps_total"), 5)
        self.assertEqual(rc.metric_sum({}, "gyro_redis_steps_total"), 0)

    def test_garbage_lines_are_skipped(self):
        self.assertEqual(rc.parse_metrics("no value here\nx NaNish\n\n"), {})


class RedisReplies(unittest.TestCase):
    def read(self, data):
        return rc.read_reply(io.BytesIO(data))

    def test_resp_replies(self):
        self.assertEqual(self.read(b"+OK\r\n"), "OK")
        self.assertEqual(self.read(b":42\r\n"), 42)
        self.assertEqual(self.read(b"$3\r\na\r\n\r\n"), b"a\r\n")
        self.assertIsNone(self.read(b"$-1\r\n"))
        self.assertEqual(self.read(b"*2\r\n$1\r\n0\r\n*1\r\n$3\r\nkey\r\n"), [b"0", [b"key"]])
        err = self.read(b"-MOVED 1 127.0.0.1:7381\r\n")
        self.assertIsInstance(err, rc.RedisError)
        with self.assertRaises(rc.RedisError):
            self.read(b"")

    def test_commands_are_arrays_of_bulk_strings(self):
        self.assertEqual(rc.encode_command(("SCAN", b"0", "COUNT", 10)),
                         b"*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$2\r\n10\r\n")

    def test_seeds(self):
        self.assertEqual(rc.parse_seed("redis://127.0.0.1:7380"), ("127.0.0.1", 7380))
        self.assertEqual(rc.parse_seed("rediss://gyro@10.0.0.1:6379"), ("10.0.0.1", 6379))
        self.assertEqual(rc.parse_seed("[::1]:7000"), ("::1", 7000))
        with self.assertRaises(ValueError):
            rc.parse_seed("redis://nowhere")

    def test_cluster_nodes_and_info(self):
        text = (
            "a1 127.0.0.1:7380@17380 myself,master - 0 0 1 connected 0-5460\n"
            "b2 127.0.0.1:7383@17383 slave a1 0 1 4 connected\n"
            "c3 127.0.0.1:7381@17381,host.example master - 0 1 2 connected 5461-10922\n"
            "d4 127.0.0.1:7384@17384 slave,fail c3 0 1 5 disconnected\n"
            "e5 :0@0 master,noaddr - 0 1 3 disconnected\n")
        self.assertEqual(rc.parse_cluster_nodes(text), [
            {"host": "127.0.0.1", "port": 7380, "role": "master"},
            {"host": "127.0.0.1", "port": 7383, "role": "replica"},
            {"host": "127.0.0.1", "port": 7381, "role": "master"}])
        info = rc.parse_info("# Stats\r\ntotal_commands_processed:12\r\n"
                             "cmdstat_fcall:calls=10,usec=400,usec_per_call=40.00\r\n")
        self.assertEqual(info["total_commands_processed"], "12")
        self.assertEqual(rc.command_stats(info), {"fcall": (10, 400)})

    def test_the_delta_splits_masters_and_replicas(self):
        before = [{"role": "master", "cpu": 1.0, "commands": 100, "calls": {"fcall": (10, 400)}},
                  {"role": "replica", "cpu": 2.0, "commands": 50, "calls": {}}]
        after = [{"role": "master", "cpu": 1.5, "commands": 160,
                  "calls": {"fcall": (40, 1600), "set": (5, 10)}},
                 {"role": "replica", "cpu": 2.25, "commands": 90, "calls": {"set": (5, 10)}}]
        d = rc.redis_delta(before, after)
        self.assertAlmostEqual(d["master_cpu"], 0.5)
        self.assertAlmostEqual(d["replica_cpu"], 0.25)
        self.assertEqual(d["master_commands"], 60)
        self.assertEqual(d["master_calls"], {"fcall": 30, "set": 5})
        self.assertEqual(d["master_usec"], {"fcall": 1200, "set": 10})


class NodeConfig(unittest.TestCase):
    def test_a_redis_node(self):
        row = {"backend": "redis", "replicas_ack": 0}
        text = rc.node_config(1, 4000, row, ["redis://127.0.0.1:7480", "127.0.0.1:7481"], "ns1",
                              ["storage.redis.export_interval_ms=5000", "storage.redis.node_id=x"])
        cfg = tomllib.loads(text)
        self.assertEqual(cfg["server"]["origin_host"], "n2.bench.gyro.test")
        self.assertEqual(cfg["admin"]["listen"], "127.0.0.1:4000")
        self.assertEqual(cfg["storage"]["backend"], "redis-cluster")
        r = cfg["storage"]["redis"]
        self.assertEqual(r["nodes"], ["redis://127.0.0.1:7480", "127.0.0.1:7481"])
        self.assertEqual((r["namespace"], r["replicas_ack"]), ("ns1", 0))
        self.assertEqual(r["export_interval_ms"], 5000)
        self.assertEqual(r["node_id"], "x")  # an extra replaces what the script set

    def test_the_embedded_node_syncs(self):
        cfg = tomllib.loads(rc.node_config(0, 4001, {"backend": "embedded"}, [], "unused", []))
        self.assertEqual(cfg["storage"], {"durability": "sync"})
        self.assertNotIn("redis", cfg["storage"])

    def test_cpus_per_node(self):
        self.assertEqual(rc.cpus_of_node(["0", "1"], 0), "0")
        self.assertEqual(rc.cpus_of_node(["0", "1"], 3), "1")
        self.assertEqual(rc.cpus_of_node([], 2), "")


class Latency(unittest.TestCase):
    def test_one_report_gives_its_own_percentiles(self):
        r = report(100, 100.0, [(50, 1000), (99, 5000), (100, 9000)])
        self.assertEqual(rc.merged_percentile([r], 50), 1000)
        self.assertEqual(rc.merged_percentile([r], 99), 5000)

    def test_curves_are_weighted_by_answers(self):
        fast = report(900, 900.0, [(50, 100), (100, 200)])
        slow = report(100, 100.0, [(50, 10_000), (100, 20_000)])
        # 45 % of all answers took 100 us or less (half of the fast node's).
        self.assertEqual(rc.merged_percentile([fast, slow], 45), 100)
        self.assertEqual(rc.merged_percentile([fast, slow], 50), 200)
        self.assertEqual(rc.merged_percentile([fast, slow], 90), 200)
        self.assertEqual(rc.merged_percentile([fast, slow], 99), 20_000)
        self.assertIsNone(rc.merged_percentile([{"answered": 0}], 50))


class Rows(unittest.TestCase):
    def args(self, *extra):
        return rc.parse_args(["--server-cpus", "0", "--load-cpus", "1", *extra])

    def test_the_rows_of_a_run(self):
        labels = [r["label"] for r in rc.plan_rows(self.args("--replicas-ack", "0", "1"))]
        self.assertEqual(labels, ["embedded (sync)", "redis-ack0 x1", "redis-ack0 x2",
                                  "redis-ack1 x1", "redis-ack1 x2"])
        self.assertEqual([r["nodes"] for r in rc.plan_rows(
            self.args("--no-embedded", "--gyro-nodes", "3"))], [3])

    def test_a_redis_row_per_ccr(self):
        args = self.args()
        row = {"label": "redis-ack1 x2", "backend": "redis", "nodes": 2, "replicas_ack": 1}
        reports = [report(10_000, 1000.0, [(50, 500), (99, 900), (100, 1000)]),
                   report(10_000, 1000.0, [(50, 600), (99, 1000), (100, 1100)], errors=3)]
        c0 = [{k: 0 for k in rc.REDIS_COUNTERS}] * 2
        c1 = [{"steps": 44_000, "pipelines": 2_000, "round_trips": 1_000, "redis_errors": 0,
               "session_lookups": 0, "replayed": 0}] * 2
        rd = {"master_cpu": 1.0, "replica_cpu": 0.4, "master_commands": 120_000,
              "master_calls": {"fcall": 88_000, "wait": 4_000},
              "master_usec": {"fcall": 800_000, "wait": 2_000}}
        r = rc.summarize(args, row, reports, gyro_cpu=2.0, wall=10.0, load_cpu=1.0,
                         counters0=c0, counters1=c1, rd=rd, alive=True)
        self.assertEqual((r["answered"], r["rate"], r["errors"]), (20_000, 2000.0, 3))
        self.assertAlmostEqual(r["gyro_cpu_us_per_answer"], 100.0)
        self.assertAlmostEqual(r["redis_cpu_us_per_answer"], 70.0)
        self.assertAlmostEqual(r["redis_master_cpu_us_per_answer"], 50.0)
        self.assertAlmostEqual(r["steps_per_ccr"], 4.4)
        self.assertAlmostEqual(r["pipelines_per_ccr"], 0.2)
        self.assertAlmostEqual(r["round_trips_per_ccr"], 0.1)
        self.assertAlmostEqual(r["redis_commands_per_ccr"], 6.0)
        self.assertAlmostEqual(r["steps_per_round_trip"], 44.0)
        self.assertEqual(list(r["redis_calls_per_ccr"]), ["fcall", "wait"])
        self.assertAlmostEqual(r["redis_usec_per_ccr"]["fcall"], 40.0)
        self.assertEqual(r["notes"], ["3 errors"])
        self.assertFalse(r["load_bound"])

    def test_a_machine_with_every_cpu_busy_is_said_to_be_saturated(self):
        row = {"label": "redis-ack0 x1", "backend": "redis", "nodes": 1, "replicas_ack": 0}
        rd = {"master_cpu": 1.0, "replica_cpu": 1.0, "master_commands": 0, "master_calls": {}}
        cpus = os.cpu_count() or 1
        r = rc.summarize(self.args(), row, [report(1000, 1000.0, [(100, 5)])],
                         gyro_cpu=float(cpus), wall=1.0, load_cpu=0.0,
                         counters0=[{k: 0 for k in rc.REDIS_COUNTERS}],
                         counters1=[{k: 0 for k in rc.REDIS_COUNTERS}], rd=rd, alive=True)
        self.assertTrue(any(n.startswith("machine saturated") for n in r["notes"]), r["notes"])
        self.assertAlmostEqual(r["redis_cpus_busy"], 2.0)
        self.assertIsNone(r["steps_per_round_trip"])

    def test_a_saturated_generator_is_load_bound(self):
        args = self.args()
        row = {"label": "embedded (sync)", "backend": "embedded", "nodes": 1, "replicas_ack": None}
        r = rc.summarize(args, row, [report(1000, 100.0, [(100, 5)], busiest=0.99)],
                         gyro_cpu=0.1, wall=10.0, load_cpu=9.9, counters0=[{}], counters1=[{}],
                         rd=None, alive=False)
        self.assertTrue(r["load_bound"])
        self.assertIn("a node died", r["notes"])
        self.assertNotIn("steps_per_ccr", r)


class Estimate(unittest.TestCase):
    row = {"backend": "redis", "gyro_cpu_us_per_answer": 70.0,
           "redis_master_cpu_us_per_answer": 35.0, "redis_replica_cpu_us_per_answer": 14.0}

    def test_cores_nodes_and_pairs(self):
        e = rc.estimate(self.row, 100_000, 0.7, 16)
        self.assertAlmostEqual(e["gyro_cores"], 10.0)   # 100k x 70 us / 0.7
        self.assertEqual(e["gyro_nodes"], 1)
        self.assertAlmostEqual(e["redis_cores_per_role"], 5.0)
        self.assertEqual(e["redis_pairs"], 5)
        e = rc.estimate(self.row, 1_000_000, 0.7, 16)
        self.assertAlmostEqual(e["gyro_cores"], 100.0)
        self.assertEqual(e["gyro_nodes"], 7)
        self.assertEqual(e["redis_pairs"], 50)

    def test_at_least_three_masters_and_the_busier_role_counts(self):
        self.assertEqual(rc.estimate(self.row, 1000, 0.7, 16)["redis_pairs"], 3)
        row = dict(self.row, redis_replica_cpu_us_per_answer=70.0)
        self.assertEqual(rc.estimate(row, 100_000, 0.7, 16)["redis_pairs"], 10)

    def test_the_embedded_store_needs_no_redis(self):
        e = rc.estimate({"backend": "embedded", "gyro_cpu_us_per_answer": 7.0}, 100_000, 0.7, 16)
        self.assertAlmostEqual(e["gyro_cores"], 1.0)
        self.assertNotIn("redis_pairs", e)


class Arguments(unittest.TestCase):
    def fails(self, *argv):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            rc.parse_args(list(argv))

    def test_defaults(self):
        a = rc.parse_args([])
        self.assertEqual((a.gyro_nodes, a.replicas_ack, a.targets), ([1, 2], [1],
                                                                     [100_000, 1_000_000]))
        self.assertEqual((a.headroom, a.redis_port, a.nodes), (0.7, 7480, None))
        self.assertIsNone(rc.parse_args(["--window", "0"]).window)
        self.assertEqual(rc.parse_args(["--server-cpus"]).server_cpus, [])

    def test_bad_arguments_are_refused(self):
        self.fails("--replicas-ack", "2")
        self.fails("--headroom", "0")
        self.fails("--headroom", "1.5")
        self.fails("--gyro-nodes", "0")
        self.fails("--nodes", "redis://nowhere")
        self.fails("--config-extra", "nodot=1")
        self.fails("--node-cores", "0")

    def test_help_shows_examples(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit):
            rc.parse_args(["--help"])
        self.assertIn("--nodes redis://127.0.0.1:7380", out.getvalue())


if __name__ == "__main__":
    unittest.main()
