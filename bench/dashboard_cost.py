"""The dashboard's cost per request (see dashboard-cost.sh)."""

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


def one_run(target, secs, dashboard):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = [VOLLEY, "run", "-c", "16", "-t", "1", "-d", f"{secs}s", "-q", "-o", out, target]
        if dashboard:
            args.insert(2, "--dashboard=127.0.0.1:0")
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
        s = json.load(open(out))["runs"][0]["summary"]
        return (usage.ru_utime + usage.ru_stime) / s["requests"] * 1e6, s["rps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=60)
    a = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([VOLLEY, "serve", "--addr", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        target = f"http://127.0.0.1:{port}/hi"
        results = {False: [], True: []}
        for _ in range(a.rounds):
            for dashboard in (False, True):
                results[dashboard].append(one_run(target, a.secs, dashboard))
    finally:
        server.terminate()
    off = statistics.median(r[0] for r in results[False])
    on = statistics.median(r[0] for r in results[True])
    print(f"{a.rounds} alternating rounds of {a.secs} s, 16 connections, 1 volley thread; load average {os.getloadavg()[0]:.1f}")
    print(f"CPU per request without the dashboard: {off:.3f} us (req/s {statistics.median(r[1] for r in results[False]):,.0f})")
    print(f"CPU per request with it and a tab open: {on:.3f} us (req/s {statistics.median(r[1] for r in results[True]):,.0f})")
    print(f"ratio {on / off:.3f} (target <= 1.02)")


if __name__ == "__main__":
    main()
