#!/usr/bin/env python3
"""volley on a many-core machine: req/s against shb, wrk and h2load, and the
open model's own lag at high rates.

nginx runs `--nginx-workers` workers on the server cores (the last ten of
sixteen by default) and every generator runs `--threads` threads on the
generator cores (the first six), so the generators, not nginx, are the
limit. Two parts, each optional:

- peers: HTTP/1.1 at 300 and 4,000 connections (volley, shb as it runs by
  default, wrk) and h2c at 60 connections x 10 streams (volley, volley
  with `--coalesce`, shb, h2load), tools alternating within each round; the
  medians of req/s and CPU per request, with volley's ratio to each peer,
  and volley's and shb's CPU per request split into user space and the
  kernel. With `--before PATH` an earlier volley build runs beside this one
  in every round of this part, for a before-and-after measured side by side.
- lag: `volley run -R RATE -c 600 --max-connections 3000` at each rate of
  `--rates`, at `--interval 1s` (and at 100 ms for the first rate), printing
  the pacer's lag (p50, p99, max), the sends 1 ms or more late and the
  latency p99 beside the service p99.

Every load goes to 127.0.0.1 and every run is bounded by its duration plus a
hard timeout.
"""

import argparse
import os
import statistics
import sys
from types import SimpleNamespace

from benchlib import (NGINX_HELLO, VOLLEY, CaseRows, alternate, free_port, machine, publish, run_wrk,
                      scratch_dir, start_nginx, stop, volley_figures)
from pacer_lag import describe
from pacer_lag import run as pacer_run
from vs_h2load import run_h2load
from vs_shb import run_shb


def peers_part(args, url, h2url):
    """Each case's rounds ({tool: [result per round]}), by case label."""
    def volley(target, conns, secs, cores, streams=None, extra=(), binary=VOLLEY):
        if streams:
            extra = ["--http2", "--streams", str(streams), *extra]
        cmd = [str(binary), "run", "-c", str(conns), "-t", str(args.threads), "-d", f"{secs}s", "--json",
               *extra, target]
        return volley_figures(cmd, cores, secs + 60)

    def volley_coalesced(target, conns, secs, cores, streams=None):
        return volley(target, conns, secs, cores, streams, extra=["--coalesce"])

    def wrk(target, conns, secs, cores, streams=None):
        return run_wrk(target, conns, secs, cores, threads=args.threads)

    def h2load(target, conns, secs, cores, streams=None):
        return run_h2load(target, conns, secs, cores, streams, threads=args.threads, protocol="h2c")

    def volley_before(target, conns, secs, cores, streams=None):
        return volley(target, conns, secs, cores, streams, binary=args.before)

    # A build to compare with runs beside this one, in every round.
    before = [("volley before", volley_before)] if args.before else []
    shb = run_shb(True, threads=args.threads)
    cases = {
        "c300": ("HTTP/1.1, 300 connections", url, 300, None, [("volley", volley), *before, ("shb", shb), ("wrk", wrk)]),
        "c4000": ("HTTP/1.1, 4,000 connections", url, 4000, None,
                  [("volley", volley), *before, ("shb", shb), ("wrk", wrk)]),
        "h2c60x10": ("h2c, 60 connections x 10 streams", h2url, 60, 10,
                     [("volley", volley), *before, ("volley coalesced", volley_coalesced), ("shb", shb),
                      ("h2load", h2load)]),
    }
    results = []
    for key in args.cases.split(","):
        label, target, conns, streams, tools = cases[key]
        rounds = alternate(key, tools, args.rounds,
                           lambda tool, fn: fn(target, conns, args.secs, args.gen_cores, streams=streams))
        results.append((label, rounds))
    return results


def peers_rows(results):
    rows = []
    for label, rounds in results:
        case = CaseRows(label, rounds, rows)
        for peer in (t for t in rounds if not t.startswith("volley")):
            target = ">= 1.0" if peer == "shb" else "reported"
            ratio = case.rps("volley") / case.rps(peer)
            case.add(f"req/s vs {peer}", f"{case.rps('volley'):,.0f}", f"{case.rps(peer):,.0f} ({peer})", ratio,
                     target, ratio >= 1.0 if peer == "shb" else None)
            case.add(f"CPU/request vs {peer}", f"{case.cpu('volley'):.2f} us", f"{case.cpu(peer):.2f} us ({peer})",
                     case.cpu("volley") / case.cpu(peer), "reported")
        case.add_split("volley", "shb", "volley vs shb")
        if "volley before" in rounds:
            tool = "volley before"
            case.add("req/s, this build vs the build before", f"{case.rps('volley'):,.0f}",
                     f"{case.rps(tool):,.0f} (before)", case.rps("volley") / case.rps(tool), "reported")
            case.add("CPU/request, this build vs the build before", f"{case.cpu('volley'):.2f} us",
                     f"{case.cpu(tool):.2f} us (before)", case.cpu("volley") / case.cpu(tool), "reported")
            case.add_split("volley", tool, "this build vs the build before")
        if "volley coalesced" in rounds:
            tool = "volley coalesced"
            ratio = case.rps(tool) / case.rps("shb")
            case.add("req/s, volley --coalesce vs shb", f"{case.rps(tool):,.0f}", f"{case.rps('shb'):,.0f} (shb)",
                     ratio, ">= 1.0", ratio >= 1.0)
            case.add("CPU/request, volley --coalesce vs shb", f"{case.cpu(tool):.2f} us",
                     f"{case.cpu('shb'):.2f} us (shb)", case.cpu(tool) / case.cpu("shb"), "reported")
    return rows


def lag_part(args, url, nginx):
    """The pacer's figures per (rate, interval), one per round."""
    runs = [(rate, "1s") for rate in args.rates] + [(args.rates[0], "100ms")]
    results = {run: [] for run in runs}
    for r in range(args.rounds_lag):
        for rate, interval in runs:
            opts = SimpleNamespace(rate=rate, conns=args.lag_conns, max_conns=args.lag_max_conns,
                                   threads=args.threads, secs=args.secs)
            res = pacer_run(url, opts, interval, args.gen_cores, VOLLEY, nginx)
            results[(rate, interval)].append(res)
            print(f"  lag round {r + 1} -R {rate} --interval {interval}: {describe(res)}", flush=True)
    return results


def lag_rows(results, rounds):
    rows = ["| -R | interval | sent | lag p50 | lag p99 | lag max | sent 1 ms+ late (waiting for a connection) "
            "| latency p99 | service p99 |", "|---|---|---|---|---|---|---|---|---|"]
    for (rate, interval), runs in results.items():
        def med(key):
            return statistics.median(x[key] for x in runs)
        rows.append(f"| {rate:,} | {interval} | {med('sent'):,.0f} | {med('lag_p50'):.3f} ms | "
                    f"{med('lag_p99'):.3f} ms | {med('lag_max'):.2f} ms | {med('late'):,.0f} "
                    f"({med('late_waiting'):,.0f}) | {med('latency_p99'):.2f} ms | {med('service_p99'):.2f} ms |")
    rows.append("")
    rows.append(f"Medians of {rounds} rounds; each round's figures are printed above the tables.")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gen-cores", default="0-5", help="the generators' cores, as taskset takes them")
    ap.add_argument("--server-cores", default="6-15", help="nginx's cores")
    ap.add_argument("--threads", type=int, default=6, help="each generator's threads")
    ap.add_argument("--nginx-workers", type=int, default=10)
    ap.add_argument("--parts", default="peers,lag")
    ap.add_argument("--cases", default="c300,c4000,h2c60x10")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the peers part")
    ap.add_argument("--secs", type=int, default=6, help="seconds per measured run")
    ap.add_argument("--rates", default="100000,300000,500000", help="the lag part's -R values")
    ap.add_argument("--rounds-lag", type=int, default=2)
    ap.add_argument("--lag-conns", type=int, default=600)
    ap.add_argument("--lag-max-conns", type=int, default=3000)
    ap.add_argument("--before", help="another volley binary (an earlier build) to run beside this one")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    args = ap.parse_args()
    args.rates = [int(r) for r in args.rates.split(",")]
    parts = args.parts.split(",")

    workdir = scratch_dir(prefix="volley-many-")
    port, h2port = free_port(), free_port()
    servers = NGINX_HELLO.format(port=port) + NGINX_HELLO.format(port=h2port).replace(
        "backlog=32768;", "backlog=32768 http2;")
    nginx = start_nginx(args.server_cores, workdir, servers, [port, h2port], workers=args.nginx_workers)
    url, h2url = f"http://127.0.0.1:{port}/hi", f"http://127.0.0.1:{h2port}/hi"
    shb_version = os.environ.get("SHB_VERSION", "shb")
    print(f"{machine()}; nginx {args.nginx_workers} workers on cores {args.server_cores}; generators "
          f"{args.threads} threads on cores {args.gen_cores}; {shb_version}", flush=True)
    peers, lags = [], {}
    try:
        if "peers" in parts:
            peers = peers_part(args, url, h2url)
        if "lag" in parts:
            lags = lag_part(args, url, nginx)
    finally:
        stop(nginx)

    setup = (f"nginx ({args.nginx_workers} workers) on cores {args.server_cores}, each generator "
             f"{args.threads} threads on cores {args.gen_cores}")
    if peers:
        publish("<!-- many-core-peers: start -->", "<!-- many-core-peers: end -->",
                f"{setup}; {shb_version} as it runs by default; medians of {args.rounds} alternating rounds "
                f"of {args.secs} s", "peer", peers_rows(peers), write=not args.no_write)
    if lags:
        publish("<!-- many-core-lag: start -->", "<!-- many-core-lag: end -->",
                f"{setup}; `volley run -t {args.threads} -c {args.lag_conns} --max-connections "
                f"{args.lag_max_conns} -d {args.secs}s`, the open model's own lag", None,
                lag_rows(lags, args.rounds_lag), write=not args.no_write, header=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
