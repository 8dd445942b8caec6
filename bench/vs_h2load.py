#!/usr/bin/env python3
"""volley against h2load over HTTP/2 and against wrk over HTTP/1.1 with TLS,
side by side, on this machine.

nginx (one worker, a 5-byte body, a self-signed certificate made at start,
TLS 1.3 with one cipher suite for every tool) is pinned to the last core and
serves two ports: HTTP/2 (ALPN h2) and HTTP/1.1 only. Each generator runs
pinned to the other core(s) with one thread. Tools alternate within each
round, every other round in the reverse order, and medians are compared as
ratios. Each process's own CPU time and
peak RSS come from GNU time. A tool that reports an error or a status other
than 2xx stops the benchmark. Every load goes to 127.0.0.1 and every run is
bounded by its duration plus a hard timeout.

With `--baseline BIN` an earlier volley binary runs every case beside this
build (as "baseline", with the same arguments, in the same alternating
rounds), and each case gets two rows: CPU per request and req/s, this build
/ the baseline.

Writes the figures between the generated-h2 markers of bench/RESULTS.md.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from benchlib import (VOLLEY, CaseRows, alternate, baseline_arg, free_port, measured, median, publish, run_wrk,
                      split_cores, start_nginx, stop, version, volley_figures)

START_MARK = "<!-- generated-h2:start -->"
END_MARK = "<!-- generated-h2:end -->"
CIPHER = "TLS_AES_128_GCM_SHA256"

# nginx before 1.25.1 turns HTTP/2 on with a parameter of `listen`; later
# versions with `http2 on;` (and warn about the parameter).
NGINX_SERVERS = """
  ssl_certificate {dir}/cert.pem;
  ssl_certificate_key {dir}/key.pem;
  ssl_protocols TLSv1.3;
  ssl_conf_command Ciphersuites {cipher};
  http2_max_concurrent_streams 256;
  server {{
    listen 127.0.0.1:{h2_port} ssl{h2_param} backlog=32768;
    {h2_on}
    location / {{ return 200 "world"; }}
  }}
  server {{
    listen 127.0.0.1:{h1_port} ssl backlog=32768;
    location / {{ return 200 "world"; }}
  }}"""


def nginx_servers(workdir, h2_port, h1_port):
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", version(["nginx", "-v"]))
    new_style = found is not None and tuple(int(g) for g in found.groups()) >= (1, 25, 1)
    return NGINX_SERVERS.format(dir=workdir, cipher=CIPHER, h2_port=h2_port, h1_port=h1_port,
                                h2_param="" if new_style else " http2",
                                h2_on="http2 on;" if new_style else "")


def self_signed_cert(workdir):
    """cert.pem and key.pem in `workdir`: P-256, for 127.0.0.1 and localhost."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", f"{workdir}/key.pem", "-out", f"{workdir}/cert.pem"],
        check=True, capture_output=True, timeout=30,
    )


def volley_command(url, conns, secs, streams=None, binary=VOLLEY):
    """The volley command line of every case (HTTP/2 when `streams` is given,
    else HTTP/1.1), for this build or `binary`: the one place to change when
    volley's flags change."""
    protocol = ["--http2", "--streams", str(streams)] if streams else ["--http1.1"]
    return [str(binary), "run", *protocol, "-c", str(conns), "-t", "1", "-d", f"{secs}s",
            "--insecure", "--json", url]


def run_h2load(url, conns, secs, cores, streams, threads=1, protocol="h2"):
    """h2load's figures; it must have negotiated `protocol` (h2c for an
    http:// URL)."""
    cmd = ["h2load", "-c", str(conns), "-m", str(streams), "-t", str(threads), "-D", str(secs), url]
    proc, cpu, rss = measured(cmd, cores, secs + 60)
    out = proc.stdout
    want, protocol = protocol, re.search(r"Application protocol: (\S+)", out)
    rps = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    counts = re.search(r"requests: \d+ total, \d+ started, (\d+) done, \d+ succeeded, "
                       r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
    status = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if not (protocol and rps and counts and status):
        raise SystemExit(f"h2load failed: {' '.join(cmd)}\n{out}\n{proc.stderr}")
    if protocol.group(1) != want:
        raise SystemExit(f"h2load negotiated {protocol.group(1)}, not {want}: {' '.join(cmd)}")
    done = int(counts.group(1))
    return {
        "rps": float(rps.group(1)),
        "requests": done,
        "errors": sum(int(g) for g in counts.groups()[1:]),
        "bad_status": sum(int(g) for g in status.groups()[1:]),
        # h2load prints no median of its request times.
        "p50_ms": float("nan"),
        "cpu_us_per_req": 1e6 * cpu / max(done, 1),
        "rss_mb": rss / 1024,
    }


def run_tool(tool, url, conns, secs, cores, streams, binary=None):
    """One run of `tool`; `binary` is volley's for "volley" and "baseline"."""
    if binary:
        return volley_figures(volley_command(url, conns, secs, streams, binary), cores, secs + 60)
    if tool == "h2load":
        return run_h2load(url, conns, secs, cores, streams)
    return run_wrk(url, conns, secs, cores)


def checked(tool, case, res):
    """Stops the benchmark if a tool errored or saw a status other than 2xx."""
    if res["errors"] or res["bad_status"] or not res["requests"]:
        raise SystemExit(f"{tool} in case {case}: {res['requests']} requests, {res['errors']} errors, "
                         f"{res['bad_status']} responses with a status other than 2xx")
    return res


# name, label, peer, connections, streams (None: HTTP/1.1 over TLS)
CASES = [
    ("h2-c10-m10", "HTTP/2 vs h2load, 10 connections x 10 streams", "h2load", 10, 10),
    ("h2-c50-m1", "HTTP/2 vs h2load, 50 connections x 1 stream", "h2load", 50, 1),
    ("tls-c50", "HTTP/1.1 over TLS vs wrk, 50 connections", "wrk", 50, None),
]

# What the table shows of each case: measure, figure, format.
MEASURES = [
    ("req/s", "rps", "{:,.0f}"),
    ("CPU per request", "cpu_us_per_req", "{:.2f} us"),
    ("peak RSS", "rss_mb", "{:.1f} MB"),
]


def issue_target(key, streams):
    """Issue 7's target for volley / peer, as (">=" or "<=", ratio), or None: reported only."""
    if key == "rps":
        return (">=", 1.0)
    if key == "cpu_us_per_req" and streams:
        return ("<=", 1.1)
    return None


def table_rows(results, only_peers):
    """A row of the table for each case and measure, volley's figure against
    the peer's, and where a baseline ran, two rows against it."""
    rows = []
    for name, label, peer, _, streams in CASES:
        for what, key, fmt in MEASURES:
            peer_median = median(results[name][peer], key)
            target = issue_target(key, streams)
            volley, ratio, met = "not run", "", ""
            if not only_peers:
                volley_median = median(results[name]["volley"], key)
                r = volley_median / peer_median
                volley, ratio = fmt.format(volley_median), f"{r:.2f}"
                if target:
                    op, bound = target
                    met = "yes" if (r >= bound if op == ">=" else r <= bound) else "**no**"
            wanted = f"{target[0]} {target[1]:.2f}" if target else "reported"
            rows.append(f"| {label}: {what} | {volley} | {fmt.format(peer_median)} | {ratio} | "
                        f"{wanted} | {met} |")
        if "baseline" in results[name]:
            CaseRows(label, results[name], rows).add_baseline("volley")
    return rows


def measure(args, cores, h2_port, h1_port):
    """Every case's rounds, the tools alternating in each (benchlib's
    `alternate`): {case: {tool: [figures]}}."""
    results = {}
    for name, _, peer, conns, streams in CASES:
        url = f"https://127.0.0.1:{h2_port if streams else h1_port}/"
        # Each tool with volley's binary, or None for a peer.
        tools = [] if args.only_peers else [("volley", VOLLEY)]
        tools.append((peer, None))
        if args.baseline:
            tools.append(("baseline", args.baseline))
        results[name] = alternate(name, tools, args.rounds, lambda tool, binary: checked(
            tool, name, run_tool(tool, url, conns, args.duration, cores, streams, binary)))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds per measured run")
    ap.add_argument("--only-peers", action="store_true", help="run h2load and wrk only, not volley")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument("--baseline", metavar="BIN",
                    help="an earlier volley binary, run beside this build in every case (as 'baseline')")
    args = ap.parse_args()
    if baseline_arg(ap, args) and args.only_peers:
        ap.error("--baseline compares this build with another: not with --only-peers, which runs no volley")

    target_core, gen_cores = split_cores()
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.1f} at the start: something else is running, and the "
              "figures will show it", flush=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="volley-bench-h2-") as workdir:
        self_signed_cert(workdir)
        h2_port, h1_port = free_port(), free_port()
        servers = nginx_servers(workdir, h2_port, h1_port)
        nginx = start_nginx(target_core, workdir, servers, [h2_port, h1_port])
        print(f"target: nginx on core {target_core} (HTTP/2 on port {h2_port}, HTTP/1.1 on {h1_port}); "
              f"generators on core(s) {gen_cores}")
        try:
            results = measure(args, gen_cores, h2_port, h1_port)
        finally:
            stop(nginx)

    rows = table_rows(results, args.only_peers)
    nginx_version = version(["nginx", "-v"]).removeprefix("nginx version: ")
    tools = ", ".join([nginx_version, version(["h2load", "--version"]), version(["wrk", "-v"])])
    setup = (f"{tools}; nginx (1 worker, TLS 1.3, {CIPHER}) pinned to core {target_core}, generators "
             f"pinned to core(s) {gen_cores} with 1 thread; medians of {args.rounds} alternating rounds "
             f"of {args.duration} s ({time.time() - started:.0f} s in all); load average {load:.1f} at "
             f"the start.")
    if args.only_peers:
        setup += " volley was not run (`--only-peers`)."
    if args.baseline:
        setup += f" The baseline build: {args.baseline}."
    publish(START_MARK, END_MARK, setup, "peer", rows, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
