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


@unittest.skipUnless(gyro_binary(), "no gyro binary built")
class TwoServers(unittest.TestCase):
    def test_compare_prints_both_rows_and_writes_the_reports(self):
        with tempfile.TemporaryDirectory() as out:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                compare.main(["--servers", "gyro-sync", "gyro-none", "--gyro", gyro_binary(),
                              "--connections", "2", "--curve", "--duration", "1s",
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
