#!/usr/bin/env python3
"""volley's HTTP/3 against oha's and shb's, and against volley's own HTTP/2
over TLS.

The target is `volley serve --tls --http3` (quinn and the h3 crates), pinned
to the last core; each generator runs one thread pinned to the other
core(s). oha's HTTP/3 is the same quinn and h3 crates as the target's, on a
tokio runtime (`--worker-threads 1`; `-p` streams per QUIC connection, as
for HTTP/2); shb's is its own, on io_uring. Tools alternate within each
round; each process's own CPU time and peak RSS come from GNU time, and the
medians are printed as ratios: volley's h3 CPU per request and req/s
against oha's, against shb's (unbatched, `--batch-size 1 --batch-linger 1`,
and as it runs by default; against the unbatched also split into user
space and the kernel) and CPU per request against volley's own h2 over TLS
at the same load. Each run also counts the UDP datagrams the machine sent
(/proc/net/snmp), to show whether the tools put the same datagrams on the
wire, and the table gives the floor that the kernel's own work sets: shb's
kernel share of its CPU per request, and the lower of volley's and shb's
kernel time against oha's whole CPU per request. Where a connection carries several streams,
volley's h3 also runs with `--coalesce` (its streams' requests go out in
rounds; every response still read as it comes). With `--baseline BIN` an
earlier volley binary runs its h3 beside this build's in every case (as
"baseline h3", with the same arguments, in the same alternating rounds,
against this build's target), and each case gets two rows: CPU per request
and req/s, this build / the baseline. Every load goes to 127.0.0.1 and every
run is bounded by its duration plus a hard timeout.
"""

import argparse
import os
import subprocess
import time

from benchlib import (VOLLEY, CaseRows, alternate, baseline_arg, free_port, median, oha_figures, publish, split_cores,
                      stop, volley_figures)
from vs_shb import run_shb


def start_target(core, port):
    """The embedded target with HTTP/3 on UDP `port`, pinned to `core`."""
    proc = subprocess.Popen(
        ["taskset", "-c", str(core), str(VOLLEY), "serve", "--tls", "--http3", "--addr", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "listening" not in line:
        stop(proc)
        raise SystemExit(f"volley serve did not start: {line!r}")
    return proc


def run_volley(protocol, more=(), binary=VOLLEY):
    def run(url, conns, secs, cores, streams):
        cmd = [str(binary), "run", f"--{protocol}", "--insecure", "-c", str(conns), "--streams", str(streams),
               "-t", "1", "-d", f"{secs}s", "--json", *more, url]
        return volley_figures(cmd, cores, secs + 60)
    return run


def run_shb_h3(batched):
    return run_shb(batched, ["--http3"])


def run_oha_h3(url, conns, secs, cores, streams):
    cmd = [os.environ.get("OHA_H3", "oha"), "--no-tui", "--output-format", "json", "--http-version", "3",
           "--insecure", "--worker-threads", "1", "-c", str(conns), "-p", str(streams), "-z", f"{secs}s", url]
    figures = oha_figures(cmd, cores, secs + 60)
    if figures["errors"]:
        # A peer that fails its requests measures nothing comparable.
        raise SystemExit(f"oha's HTTP/3 failed requests ({', '.join(figures['error_names'])}): {' '.join(cmd)}")
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5, help="seconds per measured run")
    ap.add_argument("--cases", default="50x1,10x10")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument("--baseline", metavar="BIN",
                    help="an earlier volley binary, its h3 run beside this build's in every case (as 'baseline h3')")
    args = ap.parse_args()
    baseline = baseline_arg(ap, args)

    target_core, gen_cores = split_cores()
    port = free_port()
    target = start_target(target_core, port)
    time.sleep(0.2)
    url = f"https://127.0.0.1:{port}/hi"
    shb_version = os.environ.get("SHB_VERSION", "shb")
    oha_version = f"oha v{os.environ['OHA_H3_VERSION']} (http3 feature)" if "OHA_H3_VERSION" in os.environ else "oha"
    print(f"volley serve --tls --http3 on core {target_core}; generators one thread on core(s) {gen_cores}; "
          f"{oha_version}; {shb_version}; {args.rounds} rounds of {args.secs} s")
    tools = [("volley h3", run_volley("http3")), ("volley h3 coalesced", run_volley("http3", ["--coalesce"])),
             ("volley h2", run_volley("http2")), ("oha h3", run_oha_h3),
             ("shb h3 unbatched", run_shb_h3(False)), ("shb h3", run_shb_h3(True))]
    if baseline:
        tools.append(("baseline h3", run_volley("http3", binary=baseline)))
    results = []
    try:
        for key in args.cases.split(","):
            conns, streams = (int(n) for n in key.split("x"))
            case_tools = [t for t in tools if streams > 1 or t[0] != "volley h3 coalesced"]
            rounds = alternate(key, case_tools, args.rounds,
                               lambda tool, fn: fn(url, conns, args.secs, gen_cores, streams))
            results.append((f"{conns} x {streams}", rounds))
    finally:
        stop(target)

    rows = []
    for label, rounds in results:
        case = CaseRows(label, rounds, rows)
        cpu, rps, row = case.cpu, case.rps, case.add

        ratio = cpu("volley h3") / cpu("oha h3")
        row("CPU/request, h3 vs oha h3", f"{cpu('volley h3'):.2f} us", f"{cpu('oha h3'):.2f} us (oha)", ratio,
            "<= 0.2", ratio <= 0.2)
        ratio = rps("volley h3") / rps("oha h3")
        row("req/s, h3 vs oha h3", f"{rps('volley h3'):,.0f}", f"{rps('oha h3'):,.0f} (oha)", ratio,
            ">= 1.0 unless the target is the limit", ratio >= 1.0)
        ratio = cpu("volley h3") / cpu("shb h3 unbatched")
        row("CPU/request, h3 vs shb h3 unbatched", f"{cpu('volley h3'):.2f} us", f"{cpu('shb h3 unbatched'):.2f} us",
            ratio, "<= 1.0", ratio <= 1.0)
        ratio = cpu("volley h3") / cpu("shb h3")
        row("CPU/request, h3 vs shb h3 as it runs by default", f"{cpu('volley h3'):.2f} us",
            f"{cpu('shb h3'):.2f} us", ratio, "<= 1.0", ratio <= 1.0)
        case.add_split("volley h3", "shb h3 unbatched", "h3 vs shb h3 unbatched")
        case.add_floor("volley h3", "shb h3 unbatched", "datagrams_per_req", "UDP datagrams/request")
        case.add_packets("volley h3", "oha h3", "datagrams_per_req", "UDP datagrams/request")
        # The kernel's own work bounds every generator: with no user space
        # at all, the lower of volley's and shb's kernel time per request
        # against oha's whole CPU per request is the best ratio to oha that
        # these datagrams allow.
        kernel = min(median(rounds[t], "cpu_us_per_req") - median(rounds[t], "user_us_per_req")
                     for t in ("volley h3", "shb h3 unbatched"))
        row("the lower of volley's and shb's kernel time/request over oha's CPU/request: the ratio to oha "
            "with no user space", f"{kernel:.2f} us", f"{cpu('oha h3'):.2f} us (oha)", kernel / cpu("oha h3"),
            "reported")
        ratio = rps("volley h3") / rps("shb h3")
        row("req/s, h3 vs shb h3", f"{rps('volley h3'):,.0f}", f"{rps('shb h3'):,.0f}", ratio,
            ">= 1.0 unless the target is the limit", ratio >= 1.0)
        if "volley h3 coalesced" in rounds:
            tool = "volley h3 coalesced"
            ratio = cpu(tool) / cpu("shb h3 unbatched")
            row("CPU/request, h3 --coalesce vs shb h3 unbatched", f"{cpu(tool):.2f} us",
                f"{cpu('shb h3 unbatched'):.2f} us", ratio, "<= 1.0", ratio <= 1.0)
            ratio = cpu(tool) / cpu("shb h3")
            row("CPU/request, h3 --coalesce vs shb h3 as it runs by default", f"{cpu(tool):.2f} us",
                f"{cpu('shb h3'):.2f} us", ratio, "<= 1.0", ratio <= 1.0)
            ratio = cpu(tool) / cpu("oha h3")
            row("CPU/request, h3 --coalesce vs oha h3", f"{cpu(tool):.2f} us", f"{cpu('oha h3'):.2f} us (oha)",
                ratio, "<= 0.2", ratio <= 0.2)
            ratio = rps(tool) / rps("shb h3")
            row("req/s, h3 --coalesce vs shb h3", f"{rps(tool):,.0f}", f"{rps('shb h3'):,.0f}", ratio,
                ">= 1.0 unless the target is the limit", ratio >= 1.0)
        ratio = cpu("volley h3") / cpu("volley h2")
        row("CPU/request, volley's h3 vs its h2 over TLS", f"{cpu('volley h3'):.2f} us",
            f"{cpu('volley h2'):.2f} us (volley h2)", ratio, "<= 1.5", ratio <= 1.5)
        if baseline:
            case.add_baseline("volley h3", "baseline h3")
    setup = (f"volley serve --tls --http3 pinned to core {target_core}, each generator one thread on core(s) "
             f"{gen_cores}; {oha_version}; {shb_version}; medians of {args.rounds} alternating rounds of {args.secs} s")
    if baseline:
        setup += f"; the baseline build: {baseline}"
    publish("<!-- generated-h3:start -->", "<!-- generated-h3:end -->", setup, "peer", rows,
            write=not args.no_write)


if __name__ == "__main__":
    main()
