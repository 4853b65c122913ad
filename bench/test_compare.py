#!/usr/bin/env python3
"""Tests of bench/compare.py: two gyro servers side by side (short runs),
and a saturated load generator reported as such.

    python3 bench/test_compare.py        # GYRO=path/to/gyro to pick the binary

The run test needs a built gyro ($GYRO, target/debug/gyro or
target/release/gyro, in that order) and is skipped without one.
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import server as bench  # noqa: E402


def gyro_binary():
    # The test build first: `cargo test` has just built it from this tree,
    # while a release binary may be older than the scripts.
    for p in (os.environ.get("GYRO"), os.path.join(bench.ROOT, "target/debug/gyro"),
              os.path.join(bench.ROOT, "target/release/gyro")):
        if p and os.access(p, os.X_OK):
            return p
    return None


def row(**kw):
    r = {"server": "s", "kind": "closed", "connections": 50, "rate_target": None,
         "offered_rate": None, "rate": 1000.0, "cpu_us_per_answer": 10.0, "p50": 100,
         "p99": 900, "p999": 2000, "max": 5000, "errors": 0, "load_bound": False, "notes": []}
    r.update(kw)
    return r


class LoadBound(unittest.TestCase):
    def test_a_saturated_generator_with_an_idle_server_is_load_bound(self):
        self.assertTrue(bench.is_load_bound(0.5, 0.97, 0.40))   # one busy load thread
        self.assertTrue(bench.is_load_bound(0.95, 0.0, 0.40))   # its CPUs busy
        self.assertFalse(bench.is_load_bound(0.95, 0.97, 0.90))  # the server saturated too
        self.assertFalse(bench.is_load_bound(0.30, 0.50, 0.40))

    def test_a_load_bound_row_shows_no_numbers_and_says_so(self):
        note = "LOAD-BOUND: gyro load at 97% of its CPUs, server at 40%: not reported"
        r = row(load_bound=True, notes=[note], rate=123456.0)
        cells = compare.fmt_row(r)
        self.assertEqual(cells[4:11], ["-"] * 7)
        self.assertIn("LOAD-BOUND", cells[-1])
        self.assertNotIn("123,456", " ".join(cells))

    def test_a_load_bound_point_ends_the_curve_without_counting(self):
        self.assertFalse(compare.trusted(row(rate_target=1000, offered_rate=1000,
                                             load_bound=True), 10_000))
        self.assertFalse(compare.trusted(row(rate_target=1000, offered_rate=800), 10_000))
        self.assertFalse(compare.trusted(row(rate_target=1000, offered_rate=1000, p99=20_000),
                                         10_000))
        self.assertTrue(compare.trusted(row(rate_target=1000, offered_rate=1000), 10_000))


class Threads(unittest.TestCase):
    def test_the_threads_of_every_worker_count_together(self):
        self.assertEqual(bench.thread_group("gyro-worker-12"), "gyro-worker")
        self.assertEqual(bench.thread_group("gyro-sync-0"), "gyro-sync")
        self.assertEqual(bench.thread_group("tokio-runtime-w"), "tokio-runtime-w")
        self.assertEqual(bench.thread_group("gyro-trim"), "gyro-trim")
        self.assertEqual(bench.thread_group("-7"), "-7")

    def test_a_live_process_has_its_threads_read(self):
        with open("/proc/self/comm") as f:
            me = bench.thread_group(f.read().strip())
        start = time.process_time()
        while time.process_time() - start < 0.05:  # at least a few clock ticks of CPU
            pass
        stats = bench.thread_stats(os.getpid())
        self.assertIn(me, stats)
        cpu, switches = stats[me]
        self.assertGreater(cpu, 0.0)
        self.assertGreaterEqual(switches, 0)
        self.assertEqual(bench.thread_stats(2 ** 31), {})

    def test_per_answer_figures_are_busiest_first_and_new_threads_count_from_zero(self):
        before = {"gyro-worker": (1.0, 100), "gyro-sync": (0.5, 40), "gyro-trim": (0.1, 3)}
        after = {"gyro-worker": (1.4, 300), "gyro-sync": (0.8, 1040), "gyro-trim": (0.1, 4),
                 "gyro-compact": (0.05, 20)}
        rows = bench.per_answer_by_thread(before, after, 100_000)
        self.assertEqual(list(rows), ["gyro-worker", "gyro-sync", "gyro-compact", "gyro-trim"])
        self.assertAlmostEqual(rows["gyro-worker"]["cpu_us"], 4.0)
        self.assertAlmostEqual(rows["gyro-sync"]["switches"], 0.01)
        self.assertAlmostEqual(rows["gyro-compact"]["cpu_us"], 0.5)
        self.assertEqual(bench.fmt_threads(rows),
                         "worker 4.00 (0.002 sw), sync 3.00 (0.010 sw), compact 0.50 (0.000 sw)")
        self.assertEqual(bench.fmt_threads({}), "-")


@unittest.skipUnless(gyro_binary(), "no gyro binary built")
class TwoServers(unittest.TestCase):
    def test_compare_prints_both_rows_and_writes_the_reports(self):
        with tempfile.TemporaryDirectory() as out:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                compare.main(["--servers", "gyro-sync", "gyro-none", "--gyro", gyro_binary(),
                              "--connections", "2", "--curve", "--duration", "1s", "--warmup", "200ms",
                              "--server-cpus", "", "--load-cpus", "", "--out", out])
            table = [l for l in buf.getvalue().splitlines() if l.startswith("| gyro-")]
            self.assertEqual([l.split("|")[1].strip() for l in table], ["gyro-sync", "gyro-none"])
            with open(os.path.join(out, "compare.json")) as f:
                data = json.load(f)
            self.assertEqual([r["server"] for r in data["rows"]], ["gyro-sync", "gyro-none"])
            for r in data["rows"]:
                self.assertGreater(r["answered"], 0)
                self.assertEqual(sum(r["load_report"]["series"]["answered"]), r["answered"])
            with open(os.path.join(out, "compare.html")) as f:
                page = f.read()
            self.assertIn("<iframe", page)
            self.assertIn("gyro-none", page)
            self.assertTrue(os.path.exists(os.path.join(out, "compare.md")))


if __name__ == "__main__":
    unittest.main()
