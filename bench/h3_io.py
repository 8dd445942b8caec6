#!/usr/bin/env python3
"""volley's HTTP/3 on io_uring against the same build on epoll.

`--io auto` runs HTTP/3 on the worker's io_uring ring; this measures that
choice. The target is `volley serve --tls --http3` pinned to the last core,
volley one thread pinned to the other core(s), `--io uring` and `--io epoll`
alternating within each round (with `--baseline BIN`, that build on the ring
too). Three loads: small responses at 50 connections x 1 stream and at
10 x 10, and 1 MB responses at 2 x 8, where receiving the server's GSO
batches whole (GRO) decides the throughput. The medians are printed as
ratios of the ring to epoll: CPU per response (the process's own user + sys
time, from GNU time) and responses a second. Every load goes to 127.0.0.1
and every run is bounded by its duration plus a hard timeout.
"""

import argparse

from benchlib import VOLLEY, CaseRows, alternate, free_port, publish, split_cores, stop, volley_figures
from vs_h3 import start_target

# name, connections, streams per connection, path
CASES = {
    "50x1": (50, 1, "/hi"),
    "10x10": (10, 10, "/hi"),
    "1MBx16": (2, 8, "/bytes/1000000"),
}


def run_volley(binary, io):
    def run(url, conns, streams, secs, cores):
        cmd = [str(binary), "run", "--http3", "--insecure", "--io", io, "-c", str(conns), "--streams",
               str(streams), "-t", "1", "-d", f"{secs}s", "--json", url]
        figures = volley_figures(cmd, cores, secs + 60)
        if figures["errors"]:
            raise SystemExit(f"volley failed requests: {' '.join(cmd)}")
        return figures
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--secs", type=int, default=4, help="seconds per measured run")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--baseline", help="an earlier volley binary, run on the ring beside this build")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    args = ap.parse_args()

    target_core, gen_cores = split_cores()
    port = free_port()
    target = start_target(target_core, port)
    tools = [("ring", run_volley(VOLLEY, "uring")), ("epoll", run_volley(VOLLEY, "epoll"))]
    if args.baseline:
        tools.append(("baseline ring", run_volley(args.baseline, "uring")))
    print(f"volley serve --tls --http3 on core {target_core}; volley one thread on core(s) {gen_cores}; "
          f"{args.rounds} rounds of {args.secs} s")
    results = []
    try:
        for key in args.cases.split(","):
            conns, streams, path = CASES[key]
            url = f"https://127.0.0.1:{port}{path}"
            rounds = alternate(key, tools, args.rounds,
                               lambda tool, fn: fn(url, conns, streams, args.secs, gen_cores))
            results.append((f"{conns} x {streams} {path}", rounds))
    finally:
        stop(target)

    rows = []
    for label, rounds in results:
        case = CaseRows(label, rounds, rows)
        cpu, rps, row = case.cpu, case.rps, case.add
        ratio = cpu("ring") / cpu("epoll")
        row("CPU/response, ring vs epoll", f"{cpu('ring'):.2f} us", f"{cpu('epoll'):.2f} us", ratio, "<= 1.0",
            ratio <= 1.0)
        ratio = rps("ring") / rps("epoll")
        row("responses/s, ring vs epoll", f"{rps('ring'):,.0f}", f"{rps('epoll'):,.0f}", ratio,
            ">= 1.0 unless the target is the limit", ratio >= 1.0)
        if args.baseline:
            ratio = cpu("ring") / cpu("baseline ring")
            row("CPU/response, ring vs the baseline's ring", f"{cpu('ring'):.2f} us",
                f"{cpu('baseline ring'):.2f} us", ratio, "reported")
            ratio = rps("ring") / rps("baseline ring")
            row("responses/s, ring vs the baseline's ring", f"{rps('ring'):,.0f}",
                f"{rps('baseline ring'):,.0f}", ratio, "reported")
    setup = (f"volley serve --tls --http3 pinned to core {target_core}, volley one thread on core(s) {gen_cores}, "
             f"--io uring and --io epoll alternating; medians of {args.rounds} rounds of {args.secs} s")
    publish("<!-- generated-h3-io:start -->", "<!-- generated-h3-io:end -->", setup, "epoll", rows,
            write=not args.no_write)


if __name__ == "__main__":
    main()
