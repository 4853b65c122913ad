#!/usr/bin/env python3
"""Compare Diameter credit-control servers side by side: one command, one
table (Markdown and JSON), one HTML report.

    bench/compare.py                       # gyro sync/async/none and gyserver
    bench/compare.py --servers gyro-sync gyro-none 'other=/opt/ocs --port {port}'
    bench/compare.py --thesis              # also: 50 connections, 3 million CCRs

Each server (bench/server.py's names: gyro-sync, gyro-async, gyro-none,
gyserver, NAME@PATH, NAME=COMMAND) is started in turn on the same pinned
CPUs (--server-cpus; `gyro load` on --load-cpus) and driven with the same
`gyro load` settings:

  * closed loop with each of --connections (1 and 50);
  * open loop at each of --rates (requests/s), with the last of
    --connections;
  * the latency-versus-load curve: open loop at --curve fractions (10 %,
    20 %, ...) of the server's closed-loop maximum, until the p99 passes
    --p99-bound-ms: the highest rate that kept p99 <= the bound (with the
    rate really offered, no errors, and the generator not the bottleneck)
    is the server's sustainable throughput;
  * with --thesis, the thesis's benchmark: 50 connections, 3 million CCRs
    (--thesis-count).

Server CPU per answer comes from /proc/<pid>/stat. A run in which the load
generator, not the server, was the bottleneck (bench/server.py's
LOAD-BOUND rule) shows no numbers: the row says so instead.

Writes, in --out (default bench-out/): compare.md (the table, also
printed), compare.json (every run with gyro load's whole report, its
per-second series included), compare.html (the table, the latency-versus-
load curves and, for each server, its `gyro load --report` page of the
closed-loop run with the most connections), and reports/*.html.
"""

import argparse
import html
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as bench  # noqa: E402  (bench/server.py)

DEFAULT_SERVERS = ["gyro-sync", "gyro-async", "gyro-none", "gyserver"]


def mode_of(row):
    if row["rate_target"]:
        return f"open {row['rate_target']:,.0f}/s"
    return "closed"


def run(args, server, gyro, connections, rate=None, count=None, report=None, kind=""):
    """One measured run; `report` is where gyro load writes its HTML page."""
    extra = []
    if rate and args.warmup:
        # Open loop: the first moments (connections opening, every session
        # starting at once) are not the steady state being measured.
        extra += ["--warmup", args.warmup]
    if report:
        extra += ["--report", report]
    if server.get("durability"):
        extra += ["--server-setting", f"durability={server['durability']}"]
    extra += ["--server-setting", f"name={server['label']}",
              "--server-setting", f"workers={args.workers}",
              "--server-setting", f"CPUs={args.server_cpus or 'any'}"]
    row = bench.measure(args, server, server.get("binary"), gyro, args.workers, connections,
                        count or args.count, rate, extra)
    row["kind"] = kind
    row["report_html"] = os.path.relpath(report, args.out) if report else None
    lb = " LOAD-BOUND" if row["load_bound"] else ""
    print(f"  {server['label']} {kind} conns={connections} {mode_of(row)}: {row['rate']:,.0f}/s, "
          f"p99 {bench.fmt_us(row['p99'])}, {row['cpu_us_per_answer']:.2f} us/answer{lb}",
          file=sys.stderr)
    return row


def trusted(row, bound_us):
    """A curve point that meets the objective: p99 within the bound, the
    rate really offered, no errors, the server (not the generator) measured."""
    asked, offered = row["rate_target"], row["offered_rate"]
    return (not row["load_bound"] and row["errors"] == 0 and row["p99"] <= bound_us
            and offered is not None and offered >= 0.97 * asked)


def curve(args, server, gyro, top, connections):
    """Open loop at rising fractions of `top` until p99 passes the bound."""
    bound_us = args.p99_bound_ms * 1000
    points, best = [], None
    for f in args.curve:
        rate = max(1, round(top * f))
        row = run(args, server, gyro, connections, rate=rate, kind="curve")
        row["fraction"] = f
        points.append(row)
        if trusted(row, bound_us):
            best = row
        elif row["p99"] > bound_us or row["load_bound"]:
            break
    return points, best


def fmt_row(r):
    mode = mode_of(r)
    cells = [r["server"], r["kind"], str(r["connections"]), mode]
    if r["load_bound"]:
        return cells + ["-"] * 7 + ["; ".join(r["notes"])]
    offered = r["offered_rate"]
    return cells + [
        f"{offered:,.0f}" if offered is not None else "-",
        f"{r['rate']:,.0f}", f"{r['cpu_us_per_answer']:.2f}",
        bench.fmt_us(r["p50"]), bench.fmt_us(r["p99"]), bench.fmt_us(r["p999"]),
        bench.fmt_us(r["max"]), "; ".join(r["notes"])]


COLS = ["server", "run", "conns", "load", "offered/s", "answers/s", "server CPU us/answer",
        "p50", "p99", "p99.9", "max", "notes"]


def markdown(args, rows, sustainable, header):
    out = [header, ""]
    out.append("| " + " | ".join(COLS) + " |")
    out.append("|" + "---|" * len(COLS))
    for r in rows:
        if r["kind"] != "curve":
            out.append("| " + " | ".join(fmt_row(r)) + " |")
    if sustainable:
        out += ["", f"Sustainable throughput at p99 <= {args.p99_bound_ms:g} ms "
                f"(open loop, {args.curve_connections} connections):", "",
                "| server | closed-loop max/s | sustainable/s | p99 there | first rate over the bound |",
                "|---|---|---|---|---|"]
        for s in sustainable:
            best, over = s["best"], s["over"]
            out.append("| " + " | ".join([
                s["server"], f"{s['max']:,.0f}",
                f"{best['rate_target']:,.0f}" if best else "none met it",
                bench.fmt_us(best["p99"]) if best else "-",
                (f"{over['rate_target']:,.0f}/s (p99 {bench.fmt_us(over['p99'])}"
                 + (", LOAD-BOUND" if over["load_bound"] else "") + ")") if over else "not reached",
            ]) + " |")
    return "\n".join(out) + "\n"


def svg_curves(args, sustainable):
    """p99 against the offered rate for each server (log y), with the bound."""
    w, h, left, bottom, top_m, right_m = 900, 360, 80, 50, 20, 160
    pts = [(s["server"], [(r["offered_rate"] or r["rate_target"], max(r["p99"], 1))
                          for r in s["points"]]) for s in sustainable]
    allp = [p for _, ps in pts for p in ps]
    if not allp:
        return ""
    xmax = max(x for x, _ in allp) * 1.05 or 1
    bound = args.p99_bound_ms * 1000
    ymin = 10 ** math.floor(math.log10(min(min(y for _, y in allp), bound)))
    ymax = 10 ** math.ceil(math.log10(max(max(y for _, y in allp), bound) * 1.01))
    pw, ph = w - left - right_m, h - top_m - bottom

    def X(x):
        return left + pw * x / xmax

    def Y(y):
        return top_m + ph * (1 - (math.log10(y) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)))

    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<rect x="{left}" y="{top_m}" width="{pw}" height="{ph}" fill="none" stroke="black"/>']
    d = ymin
    while d <= ymax:
        y = Y(d)
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="12" text-anchor="end">'
                 f'{html.escape(bench.fmt_us(int(d)))}</text>')
        d *= 10
    for i in range(6):
        x = xmax * i / 5
        o.append(f'<text x="{X(x):.1f}" y="{top_m + ph + 18}" font-size="12" text-anchor="middle">'
                 f'{x:,.0f}</text>')
    o.append(f'<text x="{left + pw / 2}" y="{h - 8}" font-size="13" text-anchor="middle">'
             f'offered requests/s (open loop)</text>')
    o.append(f'<text x="16" y="{top_m + ph / 2}" font-size="13" text-anchor="middle" '
             f'transform="rotate(-90 16 {top_m + ph / 2})">p99 latency (log)</text>')
    yb = Y(bound)
    o.append(f'<line x1="{left}" x2="{left + pw}" y1="{yb:.1f}" y2="{yb:.1f}" stroke="black" '
             f'stroke-dasharray="6 4"/>')
    o.append(f'<text x="{left + pw - 4}" y="{yb - 5:.1f}" font-size="12" text-anchor="end">'
             f'p99 bound {args.p99_bound_ms:g} ms</text>')
    for i, (name, ps) in enumerate(pts):
        c = colors[i % len(colors)]
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                 + " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in ps) + '"/>')
        for x, y in ps:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>')
        ly = top_m + 16 + 18 * i
        o.append(f'<line x1="{left + pw + 12}" x2="{left + pw + 32}" y1="{ly - 4}" y2="{ly - 4}" '
                 f'stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{left + pw + 38}" y="{ly}" font-size="12">{html.escape(name)}</text>')
    o.append("</svg>")
    return "\n".join(o)


def md_table_html(md):
    """The Markdown tables of `md` as HTML (other lines as paragraphs)."""
    out, in_table = [], False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(set(c) <= {"-"} for c in cells):
                continue
            if not in_table:
                out.append("<table>")
                out.append("<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cells) + "</tr>")
                in_table = True
            else:
                out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        else:
            if in_table:
                out.append("</table>")
                in_table = False
            if line.strip():
                out.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


STYLE = ("body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}"
         "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px}"
         "th{background:#f3f3f3}h2{border-bottom:1px solid #ddd}"
         "iframe{width:100%;height:1400px;border:1px solid #ccc}pre{background:#f6f6f6;padding:6px;"
         "white-space:pre-wrap}")


def write_html(args, md, sustainable, reports, command):
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>gyro bench compare</title><style>{STYLE}</style></head><body>",
             "<h1>Servers side by side</h1>", md_table_html(md)]
    svg = svg_curves(args, sustainable)
    if svg:
        parts += ["<h2>Latency versus load</h2>", f"<figure id=\"curves\">{svg}</figure>"]
    for label, path in reports:
        with open(path) as f:
            page = f.read()
        parts += [f"<h2>{html.escape(label)}</h2>",
                  f"<iframe title=\"{html.escape(label)}\" srcdoc=\"{html.escape(page, quote=True)}\">"
                  "</iframe>"]
    parts += ["<h2>Command</h2>", f"<pre>{html.escape(command)}</pre>", "</body></html>"]
    with open(os.path.join(args.out, "compare.html"), "w") as f:
        f.write("\n".join(parts) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", nargs="+", default=DEFAULT_SERVERS, metavar="SERVER",
                    help="gyro-sync, gyro-async, gyro-none, gyserver, NAME@PATH, NAME=COMMAND")
    ap.add_argument("--gyro", help="gyro binary (default: build the tree's, release)")
    ap.add_argument("--workers", type=int, default=1, help="server workers")
    ap.add_argument("--connections", type=int, nargs="+", default=[1, 50],
                    help="closed-loop runs, one per number of connections")
    ap.add_argument("--rates", type=float, nargs="*", default=[],
                    help="open-loop runs at these requests/s (last of --connections)")
    ap.add_argument("--curve", type=float, nargs="*",
                    default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
                    help="latency-versus-load: fractions of the closed-loop max ('--curve' alone: none)")
    ap.add_argument("--curve-connections", type=int,
                    help="connections of the curve's runs (default: the last of --connections)")
    ap.add_argument("--p99-bound-ms", type=float, default=10.0)
    ap.add_argument("--duration", default="5s", help="per run")
    ap.add_argument("--warmup", default="1s",
                    help="open-loop runs: latency leaves out requests intended this early "
                         "(gyro load --warmup; counts and per-second series keep them)")
    ap.add_argument("--count", type=int, help="requests per run instead of --duration")
    ap.add_argument("--thesis", action="store_true",
                    help="also the thesis's benchmark: 50 connections, --thesis-count CCRs")
    ap.add_argument("--thesis-count", type=int, default=3_000_000)
    ap.add_argument("--window", type=int, help="gyro load --window")
    ap.add_argument("--scenario", default="data")
    ap.add_argument("--load-threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0", help="taskset CPU list for the server ('' = none)")
    ap.add_argument("--load-cpus", default="1", help="taskset CPU list for gyro load ('' = none)")
    ap.add_argument("--config-extra", nargs="+", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--out", default="bench-out", help="folder for compare.{md,json,html}")
    args = ap.parse_args(argv)
    # bench.measure reads these.
    args.scrape_metrics = args.top_ups = None
    args.rate = args.rate_of_max = None
    args.curve_connections = args.curve_connections or args.connections[-1]
    args.out = os.path.abspath(args.out)
    os.makedirs(os.path.join(args.out, "reports"), exist_ok=True)

    if args.gyro:
        gyro = os.path.abspath(args.gyro)
    else:
        subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "gyro"],
                       cwd=bench.ROOT, check=True)
        gyro = os.path.join(bench.ROOT, "target/release/gyro")
    servers = [bench.parse_server(s, gyro) for s in args.servers]
    if any(s["kind"] == "gyserver" for s in servers):
        subprocess.run([os.path.join(bench.ROOT, "interop/go-diameter/run.sh")], check=True)

    rows, sustainable, reports = [], [], []
    for s in servers:
        slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in s["label"])
        closed = {}
        for c in args.connections:
            page = os.path.join(args.out, "reports", f"{slug}-closed-{c}.html")
            closed[c] = run(args, s, gyro, c, report=page, kind="closed")
            rows.append(closed[c])
        reports.append((f"{s['label']}: closed loop, {args.connections[-1]} connections",
                        os.path.join(args.out, "reports", f"{slug}-closed-{args.connections[-1]}.html")))
        for rate in args.rates:
            rows.append(run(args, s, gyro, args.connections[-1], rate=rate, kind="open"))
        if args.curve:
            top_row = closed.get(args.curve_connections) or run(
                args, s, gyro, args.curve_connections, kind="closed")
            if top_row["load_bound"]:
                sustainable.append({"server": s["label"], "max": top_row["rate"], "best": None,
                                    "over": top_row, "points": []})
            else:
                points, best = curve(args, s, gyro, top_row["rate"], args.curve_connections)
                rows += points
                bound_us = args.p99_bound_ms * 1000
                over = next((p for p in points if not trusted(p, bound_us)), None)
                sustainable.append({"server": s["label"], "max": top_row["rate"], "best": best,
                                    "over": over, "points": points})
        if args.thesis:
            page = os.path.join(args.out, "reports", f"{slug}-thesis.html")
            rows.append(run(args, s, gyro, 50, count=args.thesis_count, report=page, kind="thesis"))
            reports.append((f"{s['label']}: the thesis's benchmark (50 connections, "
                            f"{args.thesis_count:,} CCRs)", page))

    where = (f"server on CPUs {args.server_cpus or 'any'} ({args.workers} worker"
             f"{'s' if args.workers != 1 else ''}), gyro load on CPUs {args.load_cpus or 'any'}")
    per_run = f"{args.count:,} requests" if args.count else args.duration
    header = f"{args.scenario} scenario, {per_run} per run, {where}."
    md = markdown(args, rows, sustainable, header)
    command = " ".join(bench.shlex.quote(a) for a in [os.path.relpath(sys.argv[0], bench.ROOT)]
                       + (argv if argv is not None else sys.argv[1:]))
    print(md)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({"command": command, "header": header, "p99_bound_ms": args.p99_bound_ms,
                   "rows": rows,
                   "sustainable": [{"server": s["server"], "closed_loop_max": s["max"],
                                    "sustainable_rate": s["best"]["rate_target"] if s["best"] else None,
                                    "p99_us": s["best"]["p99"] if s["best"] else None}
                                   for s in sustainable]}, f, indent=1)
    write_html(args, md, sustainable, reports, command)
    return rows, sustainable


if __name__ == "__main__":
    main()
