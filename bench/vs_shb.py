#!/usr/bin/env python3
"""volley on each I/O backend against shb (io_uring) and wrk, side by side.

nginx (one worker returning a 5-byte body) is pinned to the last core and
each generator runs one thread pinned to the other core(s). Tools alternate
within each round, so drifts in machine speed hit all alike; each process's
own CPU time (in user space and in the kernel) and peak RSS come from GNU
time, and the medians are printed as ratios against shb, run twice:
unbatched (`--batch-size 1 --batch-linger 1`, each completion handled as it
comes) and as it runs by default (holding completions up to 500 us to batch
them). volley on io_uring waits for batches too, over HTTP/1.1 and h2c, each
response timed by the kernel's receive stamp; it also runs with
`--no-batch`, to show what the batches save and how its latencies read. Where
a connection carries several streams, volley also runs with `--coalesce` (its
streams' requests go out in rounds, one write each; every response still read
as it comes), on epoll. Each run also counts the TCP segments the machine
sent (/proc/net/snmp), to show whether volley and shb put the same packets
on the wire, and the table gives the share of shb's CPU per request spent
in the kernel: the ratio a generator doing the same kernel work with no
user space at all would reach. Every load goes to 127.0.0.1
and every run is bounded by its duration plus a hard timeout.
"""

import argparse
import json
import os

from benchlib import (NGINX_HELLO, VOLLEY, CaseRows, alternate, free_port, measured, median, publish, run_wrk,
                      scratch_dir, split_cores, start_nginx, stop, volley_figures)

SHB = os.environ.get("SHB", "shb")

def run_volley(io, more=(), binary=VOLLEY):
    def run(url, conns, secs, cores, streams=None, fresh=False):
        extra = ["--io", io, *more]
        if fresh:
            extra.append("--no-keepalive")
        if streams:
            extra += ["--http2", "--streams", str(streams)]
        cmd = [str(binary), "run", "-c", str(conns), "-t", "1", "-d", f"{secs}s", "--json", *extra, url]
        return volley_figures(cmd, cores, secs + 60)
    return run


def run_shb(batched, extra=(), threads=1):
    def run(url, conns, secs, cores, streams=None, fresh=False):
        cmd = [SHB, "-c", str(conns), "-t", str(threads), "-z", f"{secs}s", "--json", *extra]
        if fresh:
            cmd.append("--disable-keepalive")
        if streams:
            cmd += [] if "--http3" in extra else ["--http2"]
            cmd += ["-p", str(streams)]
        if not batched:
            cmd += ["--batch-size", "1", "--batch-linger", "1"]
        proc, cpu, rss = measured([*cmd, url], cores, secs + 60)
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise SystemExit(f"shb failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
        total = data["requests"]["total"]
        return {
            "rps": data["requestsPerSec"],
            "requests": total,
            "errors": data["requests"]["errors"],
            "p50_ms": data["latencySeconds"]["percentiles"]["p50"] * 1000,
            "cpu_us_per_req": 1e6 * cpu / max(total, 1),
            "user_us_per_req": 1e6 * cpu.user / max(total, 1),
            "segments_per_req": cpu.segments / max(total, 1),
            "datagrams_per_req": cpu.datagrams / max(total, 1),
            "rss_mb": rss / 1024,
        }
    return run


def run_wrk_case(url, conns, secs, cores, streams=None, fresh=False):
    # wrk has no switch for it: the header makes nginx close each
    # connection after its response, and wrk connects again.
    return run_wrk(url, conns, secs, cores, headers=["Connection: close"] if fresh else ())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5, help="seconds per measured run")
    ap.add_argument("--cases", default="c50,c4000,h2c10x10,h2c50x1")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument("--baseline", metavar="BIN",
                    help="an earlier volley binary, run on io_uring beside this build (as 'baseline io_uring')")
    ap.add_argument("--only", metavar="TOOLS",
                    help="run only these tools (comma-separated names as the table prints them) and print "
                         "each one's medians and its ratios to the first, instead of the table")
    args = ap.parse_args()

    target_core, gen_cores = split_cores()
    workdir = scratch_dir(prefix="volley-bench-")
    port = free_port()
    # nginx speaks h2c on a second port (HTTP/2 with prior knowledge).
    h2port = free_port()
    servers = NGINX_HELLO.format(port=port) + NGINX_HELLO.format(port=h2port).replace(
        "backlog=32768;", "backlog=32768 http2;")
    nginx = start_nginx(target_core, workdir, servers, [port, h2port])
    url = f"http://127.0.0.1:{port}/hi"
    h2url = f"http://127.0.0.1:{h2port}/hi"
    shb_version = os.environ.get("SHB_VERSION", "shb")
    print(f"nginx on core {target_core}; generators one thread on core(s) {gen_cores}; "
          f"{shb_version}; {args.rounds} rounds of {args.secs} s")
    # key: (label, URL, connections, streams per connection, a new
    # connection for each request)
    cases = {
        "c50": ("HTTP/1.1, 50 connections", url, 50, None, False),
        "c4000": ("HTTP/1.1, 4,000 connections", url, 4000, None, False),
        "h2c10x10": ("h2c, 10 connections x 10 streams", h2url, 10, 10, False),
        "h2c50x1": ("h2c, 50 connections x 1 stream", h2url, 50, 1, False),
        "fresh50": ("HTTP/1.1, 50 connections, a new one for each request", url, 50, None, True),
    }
    tools = [("volley io_uring", run_volley("uring")), ("volley epoll", run_volley("epoll")),
             ("volley coalesced", run_volley("epoll", ["--coalesce"])),
             ("volley io_uring --no-batch", run_volley("uring", ["--no-batch"])),
             ("shb unbatched", run_shb(False)), ("shb", run_shb(True)), ("wrk", run_wrk_case)]
    if args.baseline:
        tools.append(("baseline io_uring", run_volley("uring", binary=args.baseline)))
    if args.only:
        named = dict(tools)
        unknown = [name for name in args.only.split(",") if name not in named]
        if unknown:
            raise SystemExit(f"--only: no tool named {', '.join(unknown)} (they are: {', '.join(named)})")
        tools = [(name, named[name]) for name in args.only.split(",")]
    results = []
    try:
        for key in args.cases.split(","):
            label, target, conns, streams, fresh = cases[key]
            case_tools = [t for t in tools if not (streams and t[0] == "wrk")
                          and not ((streams or 1) < 2 and t[0] == "volley coalesced")]
            rounds = alternate(key, case_tools, args.rounds,
                               lambda tool, fn: fn(target, conns, args.secs, gen_cores, streams=streams, fresh=fresh))
            results.append((label, rounds, fresh))
    finally:
        stop(nginx)

    if args.only:
        print_medians(results)
        return
    rows = []
    for label, rounds, fresh in results:
        # The targets are for kept-alive connections; a new connection per
        # request is reported beside them.
        target = (lambda aim: "reported") if fresh else (lambda aim: aim)
        met = (lambda ok: None) if fresh else (lambda ok: ok)
        case = CaseRows(label, rounds, rows)
        cpu, rps, row = case.cpu, case.rps, case.add

        for io in ("io_uring", "epoll"):
            tool = f"volley {io}"
            unbatched = cpu(tool) / cpu("shb unbatched")
            row(f"CPU/request, volley on {io} vs shb unbatched", f"{cpu(tool):.2f} us",
                f"{cpu('shb unbatched'):.2f} us", unbatched, target("<= 0.95") if io == "io_uring" else "reported",
                met(unbatched <= 0.95) if io == "io_uring" else None)
            row(f"CPU/request, volley on {io} vs shb as it runs by default", f"{cpu(tool):.2f} us",
                f"{cpu('shb'):.2f} us", cpu(tool) / cpu("shb"), target("<= 1.0 (aim)") if io == "io_uring" else "reported")
        if "volley coalesced" in rounds:
            tool = "volley coalesced"
            ratio = cpu(tool) / cpu("shb unbatched")
            row("CPU/request, volley --coalesce (epoll) vs shb unbatched", f"{cpu(tool):.2f} us",
                f"{cpu('shb unbatched'):.2f} us", ratio, "<= 0.95", ratio <= 0.95)
            row("CPU/request, volley --coalesce (epoll) vs shb as it runs by default", f"{cpu(tool):.2f} us",
                f"{cpu('shb'):.2f} us", cpu(tool) / cpu("shb"), "<= 1.0 (aim)")
            row("req/s, volley --coalesce vs shb", f"{rps(tool):,.0f}", f"{rps('shb'):,.0f}",
                rps(tool) / rps("shb"), ">= 1.0 unless nginx is the limit")
        if "volley io_uring --no-batch" in rounds:
            tool = "volley io_uring --no-batch"
            row("CPU/request, volley on io_uring --no-batch vs shb unbatched", f"{cpu(tool):.2f} us",
                f"{cpu('shb unbatched'):.2f} us", cpu(tool) / cpu("shb unbatched"), "reported")
            for q in ("p50", "p99"):
                batched, unbatched = (median(rounds[t], f"{q}_ms") for t in ("volley io_uring", tool))
                row(f"{q}, volley on io_uring (batches) vs the same with --no-batch", f"{batched:.3f} ms",
                    f"{unbatched:.3f} ms", batched / unbatched, "reported")
        if "baseline io_uring" in rounds:
            tool = "baseline io_uring"
            row("CPU/request, volley on io_uring vs the baseline build on io_uring",
                f"{cpu('volley io_uring'):.2f} us", f"{cpu(tool):.2f} us",
                cpu("volley io_uring") / cpu(tool), "reported")
        row("req/s, volley on io_uring vs shb", f"{rps('volley io_uring'):,.0f}", f"{rps('shb'):,.0f}",
            rps("volley io_uring") / rps("shb"), target(">= 1.0 unless nginx is the limit"))
        p50 = median(rounds["volley io_uring"], "p50_ms")
        row("p50, volley on io_uring vs shb", f"{p50:.3f} ms",
            f"{median(rounds['shb'], 'p50_ms'):.3f} ms", p50 / median(rounds["shb"], "p50_ms"), "reported")
        # Where the CPU goes, for the backend `--io auto` picks (plain runs
        # in the closed model, HTTP/2 too, go on the ring).
        case.add_split("volley io_uring", "shb unbatched", "volley io_uring vs shb unbatched")
        case.add_floor("volley io_uring", "shb unbatched")
        if "wrk" in rounds:
            ratio = cpu("volley io_uring") / cpu("wrk")
            row("CPU/request, volley on io_uring vs wrk", f"{cpu('volley io_uring'):.2f} us",
                f"{cpu('wrk'):.2f} us (wrk)", ratio, target("<= 0.85"), met(ratio <= 0.85))
    setup = (f"nginx (1 worker) pinned to core {target_core}, each generator one thread on core(s) "
             f"{gen_cores}; {shb_version}; medians of {args.rounds} alternating rounds of {args.secs} s")
    publish("<!-- generated-shb:start -->", "<!-- generated-shb:end -->", setup, "shb", rows,
            write=not args.no_write)

def print_medians(results):
    """For `--only`: each tool's medians per case, and their ratios to the
    first tool's."""
    figures = (("cpu_us_per_req", "CPU us/req"), ("user_us_per_req", "user us/req"), ("rps", "req/s"),
               ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("segments_per_req", "segments/req"))
    for label, rounds, _ in results:
        print(f"\n{label}")
        if not rounds:
            print("  none of these tools runs this case")
            continue
        first = next(iter(rounds))
        for tool, runs in rounds.items():
            cells = []
            for key, name in figures:
                if all(key in run for run in runs):
                    mine, theirs = median(runs, key), median(rounds[first], key)
                    cells.append(f"{name} {mine:,.3f} ({mine / theirs:.3f}x)")
            print(f"  {tool:28} " + "  ".join(cells))


if __name__ == "__main__":
    main()
