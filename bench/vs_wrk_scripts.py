#!/usr/bin/env python3
"""`volley run -s` against wrk running the same Lua scripts, side by side.

nginx (one worker, a 5-byte body) is pinned to the last core; volley and
wrk each run one thread on the other core(s), with the same script from
examples/scripts, alternating within each round. Three scripts, one for
each way a script costs: `post.lua` (no callback: the request is built
once), `counter.lua` (`request()` on every request) and `setup.lua`
(`request()` and `response()` on every request, so the response's
headers and body go to Lua). CPU per request is each process's own user +
sys time (GNU time) over the requests it completed. Memory: volley's peak
RSS with `setup.lua` over a short and a four times longer run.

Every load goes to 127.0.0.1 and every run is bounded by its duration plus
a hard timeout. Writes the figures between the generated markers of
bench/RESULTS.md ("wrk's Lua scripts").
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (NGINX_HELLO, ROOT, VOLLEY, alternate, free_port, measured, median, publish, run_wrk,
                      scratch_dir, split_cores, start_nginx, stop, version)

START_MARK = "<!-- wrk-scripts:start -->"
END_MARK = "<!-- wrk-scripts:end -->"
SCRIPTS = ROOT / "examples" / "scripts"
# What each script costs wrk and volley beyond its request.
CASES = (("post.lua", "no callback"), ("counter.lua", "request() per request"),
         ("setup.lua", "request() and response() per request"))
TARGET = 0.9


def run_volley(url, conns, secs, cores, lua):
    # The report goes to a file: what the script prints goes to stdout, as
    # under wrk.
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        cmd = [str(VOLLEY), "run", "-c", str(conns), "-t", "1", "-d", f"{secs}s", "-q", "-o", str(report),
               "-s", str(lua), url]
        proc, cpu, rss = measured(cmd, cores, secs + 60)
        if proc.returncode != 0 or not report.exists():
            raise SystemExit(f"volley failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
        summary = json.loads(report.read_text())["runs"][0]["summary"]
    requests = max(summary["requests"], 1)
    return {"rps": summary["rps"], "requests": summary["requests"], "errors": summary["errors"],
            "p50_ms": summary["latency_ms"]["p50"], "cpu_us_per_req": 1e6 * cpu / requests, "rss_mb": rss / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--secs", type=int, default=3, help="seconds per measured run")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    args = ap.parse_args()

    target_core, gen_cores = split_cores()
    workdir = scratch_dir(prefix="volley-bench-")
    port = free_port()
    nginx = start_nginx(target_core, workdir, NGINX_HELLO.format(port=port), [port])
    url = f"http://127.0.0.1:{port}/"
    started = time.time()
    results = {}
    try:
        for name, _ in CASES:
            lua = SCRIPTS / name
            tools = [("volley", run_volley), ("wrk", run_wrk)]
            results[name] = alternate(name, tools, args.rounds,
                                      lambda tool, fn: fn(url, args.connections, args.secs, gen_cores, lua=lua))
        lua = SCRIPTS / "setup.lua"
        results["rss_short"] = run_volley(url, args.connections, args.secs, gen_cores, lua)
        results["rss_long"] = run_volley(url, args.connections, 4 * args.secs, gen_cores, lua)
    finally:
        stop(nginx)

    rows = []
    for name, what in CASES:
        v = median(results[name]["volley"], "cpu_us_per_req")
        w = median(results[name]["wrk"], "cpu_us_per_req")
        ok = v / w <= TARGET
        rows.append(f"| `{name}` ({what}): CPU per request | {v:.2f} us | {w:.2f} us | {v / w:.2f} | "
                    f"<= {TARGET} | {'yes' if ok else '**no**'} |")
        v = median(results[name]["volley"], "rps")
        w = median(results[name]["wrk"], "rps")
        rows.append(f"| `{name}`: req/s | {v:,.0f} | {w:,.0f} | {v / w:.2f} | reported | |")
    short, long = results["rss_short"]["rss_mb"], results["rss_long"]["rss_mb"]
    flat = long <= short * 1.1 + 0.5
    rows.append(f"| `setup.lua`: peak RSS, {4 * args.secs} s ({args.secs} s run) | {long:.1f} MB ({short:.1f} MB) | "
                f"{median(results['setup.lua']['wrk'], 'rss_mb'):.1f} MB | {long / short:.2f} | flat | "
                f"{'yes' if flat else '**no**'} |")
    setup = (f"{version(['wrk', '-v'])}; nginx (1 worker) pinned to core {target_core}, each tool one thread "
             f"pinned to core(s) {gen_cores}, {args.connections} connections; medians of {args.rounds} "
             f"alternating rounds of {args.secs} s ({time.time() - started:.0f} s in all).")
    publish(START_MARK, END_MARK, setup, "wrk", rows, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
