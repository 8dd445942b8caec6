"""The dashboard's and the metric outputs' cost per request (see dashboard-cost.sh)."""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "browser"))
from common import browser_page  # noqa: E402

VOLLEY = "target/release/volley"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def follow(url_box, done):
    """Keeps a chromium tab on the dashboard until the run ends."""
    while not url_box and not done.is_set():
        time.sleep(0.05)
    if not url_box:
        return
    with browser_page() as page:
        page.goto(url_box[0])
        page.wait_for_selector('#progress[data-state="finished"]', timeout=0)


def start_receivers(workdir):
    """A Prometheus remote-write receiver, and the OTLP collector when built;
    returns the --out/--metrics-addr flags and the processes to stop."""
    flags, procs = ["--metrics-addr", "127.0.0.1:0"], []
    port = free_port()
    with open(os.path.join(workdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1h\n")
    procs.append(subprocess.Popen(
        ["prometheus", f"--config.file={workdir}/prometheus.yml", f"--storage.tsdb.path={workdir}/tsdb",
         f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
         "--enable-feature=native-histograms"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    flags += ["--out", f"prometheus=http://127.0.0.1:{port}/api/v1/write"]
    collector = os.environ.get("VOLLEY_OTELCOL", "target/otelcol")
    if os.path.exists(collector):
        port = free_port()
        env = dict(os.environ, OTELCOL_ENDPOINT=f"127.0.0.1:{port}", OTELCOL_OUTPUT=f"{workdir}/otlp.jsonl")
        procs.append(subprocess.Popen([collector, "--config", ".ci/otelcol.yaml"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        flags += ["--out", f"otlp=http://127.0.0.1:{port}"]
    else:
        print(f"note: no collector at {collector}: the OTLP output is not measured", file=sys.stderr)
    time.sleep(2)
    return flags, procs


def one_run(target, secs, dashboard, outputs):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = [VOLLEY, "run", "-c", "16", "-t", "1", "-d", f"{secs}s", "-q", "-o", out, target]
        if dashboard:
            args[2:2] = ["--dashboard=127.0.0.1:0"] + outputs
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url_box, done = [], threading.Event()
        tab = threading.Thread(target=follow, args=(url_box, done)) if dashboard else None
        if tab:
            tab.start()
        for line in proc.stderr:
            if line.startswith("dashboard: "):
                url_box.append(line.split()[1])
        # The whole process's CPU (engine, collector, dashboard threads).
        _, _, usage = os.wait4(proc.pid, 0)
        done.set()
        if tab:
            tab.join(timeout=60)
        report = json.load(open(out))
        if any(o["dropped"] for o in report.get("outputs", [])):
            print(f"warning: an output dropped batches: {report['outputs']}", file=sys.stderr)
        s = report["runs"][0]["summary"]
        return (usage.ru_utime + usage.ru_stime) / s["requests"] * 1e6, s["rps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--outputs", action="store_true",
                    help="the measured runs also send to Prometheus, the OTLP collector and a scrape endpoint")
    a = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([VOLLEY, "serve", "--addr", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    workdir = tempfile.TemporaryDirectory()
    outputs, receivers = start_receivers(workdir.name) if a.outputs else ([], [])
    try:
        time.sleep(0.5)
        target = f"http://127.0.0.1:{port}/hi"
        results = {False: [], True: []}
        for _ in range(a.rounds):
            for dashboard in (False, True):
                results[dashboard].append(one_run(target, a.secs, dashboard, outputs))
    finally:
        server.terminate()
        for proc in receivers:
            proc.terminate()
            proc.wait()
    off = statistics.median(r[0] for r in results[False])
    on = statistics.median(r[0] for r in results[True])
    print(f"{a.rounds} alternating rounds of {a.secs} s, 16 connections, 1 volley thread; load average {os.getloadavg()[0]:.1f}")
    print(f"CPU per request without the dashboard: {off:.3f} us (req/s {statistics.median(r[1] for r in results[False]):,.0f})")
    what = "it, a tab open and the metric outputs on" if a.outputs else "it and a tab open"
    print(f"CPU per request with {what}: {on:.3f} us (req/s {statistics.median(r[1] for r in results[True]):,.0f})")
    print(f"ratio {on / off:.3f} (target <= 1.02)")


if __name__ == "__main__":
    main()
