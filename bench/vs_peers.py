#!/usr/bin/env python3
"""volley against wrk (and optionally oha), side by side, on this machine.

The target (nginx with one worker returning a 5-byte body, or `volley serve`)
is pinned to the last core; each generator runs pinned to the other core(s)
with one thread. Tools alternate within each round so drifts in machine speed
hit both alike, and medians are compared as ratios. Each process's own CPU
time and peak RSS come from GNU time. Every load goes to 127.0.0.1 and every
run is bounded by its duration plus a hard timeout.

With `--baseline BIN` an earlier volley binary runs every alternating case
beside this build (as "baseline", with the same arguments, the target being
this build's in both), and each case gets two rows: CPU per request and
req/s, this build / the baseline (the two runs for peak RSS over time are
this build's alone).

Writes the figures between the generated markers of bench/RESULTS.md.
"""

import argparse
import functools
import sys
import time

from benchlib import (NGINX_HELLO, VOLLEY, CaseRows, alternate, baseline_arg, free_port, median, oha_figures, publish,
                      run_wrk, scratch_dir, split_cores, start_nginx, start_pinned, stop, version, volley_figures)

START_MARK = "<!-- generated:start -->"
END_MARK = "<!-- generated:end -->"

class Target:
    """The server under load, pinned to one core."""

    def __init__(self, kind, core, workdir):
        self.kind = kind
        self.port = free_port()
        if kind == "nginx":
            self.proc = start_nginx(core, workdir, NGINX_HELLO.format(port=self.port), [self.port])
        else:
            cmd = [str(VOLLEY), "serve", "--addr", f"127.0.0.1:{self.port}"]
            self.proc = start_pinned(cmd, core, [self.port])
        self.url = f"http://127.0.0.1:{self.port}/hi"

    def stop(self):
        stop(self.proc)


def run_volley(url, conns, secs, cores, extra=(), binary=VOLLEY):
    cmd = [str(binary), "run", "-c", str(conns), "-t", "1", "-d", f"{secs}s", "--json", *extra, url]
    return volley_figures(cmd, cores, secs + 60)


def run_oha(url, conns, secs, cores, extra=()):
    cmd = ["oha", "--no-tui", "--output-format", "json", "-z", f"{secs}s", "-c", str(conns), *extra, url]
    return oha_figures(cmd, cores, secs + 60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["nginx", "volley"], default="nginx")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5, help="seconds per measured run")
    ap.add_argument("--with-oha", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument("--baseline", metavar="BIN",
                    help="an earlier volley binary, run beside this build in every alternating case (as 'baseline')")
    args = ap.parse_args()
    baseline = baseline_arg(ap, args)

    target_core, gen_cores = split_cores()
    workdir = scratch_dir(prefix="volley-bench-")
    target = Target(args.target, target_core, workdir)
    peers = [("volley", run_volley), ("wrk", run_wrk)]
    if baseline:
        peers.append(("baseline", functools.partial(run_volley, binary=baseline)))
    started = time.time()
    results = {}
    try:
        def case(name, conns, secs, tools, **kw):
            # The baseline takes volley's arguments.
            kw["baseline"] = kw.get("volley", {})
            results[name] = alternate(name, tools, args.rounds,
                                      lambda tool, fn: fn(target.url, conns, secs, gen_cores, **kw.get(tool, {})))

        oha = [("oha", run_oha)] if args.with_oha else []
        print(f"target: {args.target} on core {target_core}; generators on core(s) {gen_cores}")
        case("c50", 50, args.secs, peers + oha)
        case("c10000", 10000, args.secs, peers)
        case("c1", 1, max(3, args.secs - 2), peers)
        # wrk has no switch for it: with the header nginx closes each
        # connection after its response, and wrk connects again.
        case("nokeepalive", 50, max(3, args.secs - 2), peers + oha,
             volley={"extra": ["--no-keepalive"]}, wrk={"headers": ["Connection: close"]},
             oha={"extra": ["--disable-keepalive"]})
        case("pipeline16", 50, max(3, args.secs - 2), peers,
             volley={"extra": ["--pipeline", "16"]}, wrk={"pipeline": 16})
        # Memory over time: the same load for a short and a long run.
        results["rss_short"] = {"volley": [run_volley(target.url, 50, 5, gen_cores)]}
        results["rss_long"] = {"volley": [run_volley(target.url, 50, 20, gen_cores)]}
    finally:
        target.stop()

    def med(case_name, tool, key):
        return median(results[case_name][tool], key)

    rows = []

    def row(label, v, w, ratio, target, ok):
        rows.append(f"| {label} | {v} | {w} | {ratio} | {target} | {'yes' if ok else '**no**'} |")

    r = med("c50", "volley", "rps") / med("c50", "wrk", "rps")
    row("50 connections, 1 thread: req/s", f"{med('c50', 'volley', 'rps'):,.0f}",
        f"{med('c50', 'wrk', 'rps'):,.0f}", f"{r:.2f}", ">= 1.00", r >= 1.0)
    r = med("c50", "volley", "cpu_us_per_req") / med("c50", "wrk", "cpu_us_per_req")
    row("50 connections: CPU per request", f"{med('c50', 'volley', 'cpu_us_per_req'):.2f} us",
        f"{med('c50', 'wrk', 'cpu_us_per_req'):.2f} us", f"{r:.2f}", "<= 1.05", r <= 1.05)
    r = med("c10000", "volley", "rps") / med("c10000", "wrk", "rps")
    row("10,000 connections: req/s", f"{med('c10000', 'volley', 'rps'):,.0f}",
        f"{med('c10000', 'wrk', 'rps'):,.0f}", f"{r:.2f}", ">= 1.00", r >= 1.0)
    short_rss = results["rss_short"]["volley"][0]["rss_mb"]
    long_rss = results["rss_long"]["volley"][0]["rss_mb"]
    row("peak RSS, 50 connections, 20 s (5 s run)", f"{long_rss:.1f} MB ({short_rss:.1f} MB)",
        f"{med('c50', 'wrk', 'rss_mb'):.1f} MB", f"{long_rss / short_rss:.2f} (20 s / 5 s)",
        "<= 16 MB, not growing", long_rss <= 16 and long_rss <= short_rss * 1.1 + 0.5)
    v = med("c10000", "volley", "rss_mb")
    row("peak RSS, 10,000 connections", f"{v:.1f} MB", f"{med('c10000', 'wrk', 'rss_mb'):.1f} MB",
        "", "<= 64 MB", v <= 64)
    r = med("c1", "volley", "p50_ms") / med("c1", "wrk", "p50_ms")
    row("1 connection: p50 latency", f"{1000 * med('c1', 'volley', 'p50_ms'):.1f} us",
        f"{1000 * med('c1', 'wrk', 'p50_ms'):.1f} us", f"{r:.2f}", "<= 1.10", r <= 1.10)
    oha_nk = f", {med('nokeepalive', 'oha', 'rps'):,.0f} (oha)" if args.with_oha else ""
    r = med("nokeepalive", "volley", "rps") / med("nokeepalive", "wrk", "rps")
    rows.append(f"| --no-keepalive, 50 connections: connections/s | "
                f"{med('nokeepalive', 'volley', 'rps'):,.0f} | "
                f"{med('nokeepalive', 'wrk', 'rps'):,.0f} (Connection: close){oha_nk} | {r:.2f} | reported | |")
    r = med("nokeepalive", "volley", "cpu_us_per_req") / med("nokeepalive", "wrk", "cpu_us_per_req")
    rows.append(f"| --no-keepalive, 50 connections: CPU per request | "
                f"{med('nokeepalive', 'volley', 'cpu_us_per_req'):.2f} us | "
                f"{med('nokeepalive', 'wrk', 'cpu_us_per_req'):.2f} us | {r:.2f} | reported | |")
    r = med("pipeline16", "volley", "rps") / med("pipeline16", "wrk", "rps")
    rows.append(f"| --pipeline 16, 50 connections: req/s | {med('pipeline16', 'volley', 'rps'):,.0f} | "
                f"{med('pipeline16', 'wrk', 'rps'):,.0f} (Lua script) | {r:.2f} | reported | |")
    if args.with_oha:
        rows.append(f"| oha, 50 connections: req/s, CPU/request, RSS | | "
                    f"{med('c50', 'oha', 'rps'):,.0f}, {med('c50', 'oha', 'cpu_us_per_req'):.2f} us, "
                    f"{med('c50', 'oha', 'rss_mb'):.0f} MB | | | |")

    if baseline:
        for name, label in (("c50", "50 connections"), ("c10000", "10,000 connections"), ("c1", "1 connection"),
                            ("nokeepalive", "--no-keepalive, 50 connections"),
                            ("pipeline16", "--pipeline 16, 50 connections")):
            CaseRows(label, results[name], rows).add_baseline("volley")

    setup = (f"{version(['wrk', '-v'])}; target {args.target} (1 worker) pinned to core "
             f"{target_core}, generators pinned to core(s) {gen_cores} with 1 thread; medians of "
             f"{args.rounds} alternating rounds of {args.secs} s ({time.time() - started:.0f} s in all).")
    if baseline:
        setup += f" The baseline build: {baseline}."
    publish(START_MARK, END_MARK, setup, "wrk", rows, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
