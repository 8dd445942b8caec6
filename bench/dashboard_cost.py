"""The dashboard's and the metric outputs' cost per request (see dashboard-cost.sh)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import benchlib

sys.path.insert(0, str(benchlib.ROOT / "tests" / "browser"))
from common import browser_page  # noqa: E402

VOLLEY = str(benchlib.VOLLEY)
CONNECTIONS = 16
# Well under what `volley serve` answers on one core beside chromium (~13k req/s here).
RATE = 8000
START_MARK = "<!-- dashboard-cost: start -->"
END_MARK = "<!-- dashboard-cost: end -->"


def follow(url_box, seen, stop, limit_s):
    """Keeps a chromium tab on the dashboard from the start of the run to its
    final report, and notes the request count it ended on (so a tab that
    lost the stream shows up as a failed round, not as a cheap one)."""
    deadline = time.monotonic() + limit_s
    while not url_box and not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not url_box:
        return
    with browser_page() as page:
        page.goto(url_box[0])
        page.wait_for_selector('#progress[data-state="finished"]', timeout=limit_s * 1000)
        seen["final_requests"] = int(float(page.get_attribute('[data-tile="requests"]', "data-value")))
        seen["errors"] = page.errors


def start_receivers(workdir):
    """A Prometheus remote-write receiver, and the OTLP collector when built;
    returns the --out/--metrics-addr flags and the processes to stop."""
    flags, procs = ["--metrics-addr", "127.0.0.1:0"], []
    port = benchlib.free_port()
    with open(os.path.join(workdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1h\n")
    procs.append(subprocess.Popen(
        ["prometheus", f"--config.file={workdir}/prometheus.yml", f"--storage.tsdb.path={workdir}/tsdb",
         f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
         "--enable-feature=native-histograms"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    flags += ["--out", f"prometheus=http://127.0.0.1:{port}/api/v1/write"]
    collector = os.environ.get("VOLLEY_OTELCOL", "target/otelcol")
    if os.path.exists(collector):
        port = benchlib.free_port()
        env = dict(os.environ, OTELCOL_ENDPOINT=f"127.0.0.1:{port}", OTELCOL_OUTPUT=f"{workdir}/otlp.jsonl")
        procs.append(subprocess.Popen([collector, "--config", ".ci/otelcol.yaml"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        flags += ["--out", f"otlp=http://127.0.0.1:{port}"]
    else:
        print(f"note: no collector at {collector}: the OTLP output is not measured", file=sys.stderr)
    time.sleep(2)
    return flags, procs


def one_run(target, secs, dashboard, case):
    """One bounded run of volley (pinned to a core when the case says so);
    returns its CPU time per request (user + sys of the whole process:
    engine, collector and, when on, the dashboard's thread) and its req/s."""
    limit_s = secs + 60
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = case["pin"] + [VOLLEY, "run", *case["args"], "-d", f"{secs}s", "-q", "-o", out, target]
        if dashboard:
            at = len(case["pin"]) + 2
            args[at:at] = ["--dashboard=127.0.0.1:0"] + case["outputs"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url_box, seen, stop = [], {}, threading.Event()
        tab = threading.Thread(target=follow, args=(url_box, seen, stop, limit_s)) if dashboard else None
        if tab:
            tab.start()
        killer = threading.Timer(limit_s, proc.kill)
        killer.start()
        for line in proc.stderr:
            if line.startswith("dashboard: "):
                url_box.append(line.split()[1])
        # taskset, when used, execs volley: this is volley's own rusage.
        _, status, usage = os.wait4(proc.pid, 0)
        killer.cancel()
        stop.set()
        if tab:
            tab.join(timeout=limit_s)
        if status != 0:
            raise SystemExit(f"volley failed or ran past {limit_s} s: {' '.join(args)}")
        report = json.load(open(out))
        if any(o["dropped"] for o in report.get("outputs", [])):
            print(f"warning: an output dropped batches: {report['outputs']}", file=sys.stderr)
        s = report["runs"][0]["summary"]
        if dashboard:
            if seen.get("final_requests") != s["requests"]:
                raise SystemExit(f"the tab did not follow the run to its end: it showed {seen}, "
                                 f"the report has {s['requests']} requests")
            if seen["errors"]:
                raise SystemExit(f"the dashboard page had console errors: {seen['errors']}")
        return (usage.ru_utime + usage.ru_stime) / s["requests"] * 1e6, s["rps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--rate", type=int, default=RATE)
    ap.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    ap.add_argument("--outputs", action="store_true",
                    help="the measured runs also send to Prometheus, the OTLP collector and a scrape endpoint")
    a = ap.parse_args()
    workdir = tempfile.TemporaryDirectory()
    outputs, receivers = start_receivers(workdir.name) if a.outputs else ([], [])
    try:
        run_cases(a, outputs)
    finally:
        for proc in receivers:
            proc.terminate()
            proc.wait()


def run_cases(a, outputs):
    cpus = sorted(os.sched_getaffinity(0))
    gen, other = cpus[0], cpus[-1]
    cases = [
        # The same work in both runs: a fixed rate the pinned target keeps up
        # with even beside chromium, volley alone on its core, so the
        # difference is what the dashboard costs volley.
        {"name": f"`-R {a.rate} -c {CONNECTIONS} -t 1`, volley pinned to core {gen}; target and tab on core {other}",
         "args": ["-R", str(a.rate), "-c", str(CONNECTIONS), "-t", "1"], "pin": ["taskset", "-c", str(gen)],
         "tab_core": other, "outputs": outputs},
        # As fast as it goes, nothing pinned: the target and chromium share
        # both cores with volley, so req/s (and with it the batching, which
        # sets CPU per request) moves with the browser's drawing too.
        {"name": f"`-c {CONNECTIONS} -t 1` closed, as fast as it goes, nothing pinned",
         "args": ["-c", str(CONNECTIONS), "-t", "1"], "pin": [], "tab_core": None, "outputs": outputs},
    ]
    port = benchlib.free_port()
    rows = []
    for case in cases:
        # This script and its chromium stay off volley's core when it is pinned.
        os.sched_setaffinity(0, {case["tab_core"]} if case["tab_core"] is not None else set(cpus))
        server_cmd = [VOLLEY, "serve", "--addr", f"127.0.0.1:{port}"]
        server = benchlib.start_pinned(server_cmd, other if case["pin"] else ",".join(map(str, cpus)), [port])
        target = f"http://127.0.0.1:{port}/hi"
        results = {False: [], True: []}
        print(case["name"], flush=True)
        try:
            for r in range(a.rounds):
                for dashboard in (False, True):
                    results[dashboard].append(one_run(target, a.secs, dashboard, case))
                off, on = results[False][-1], results[True][-1]
                print(f"  round {r + 1}: without {off[0]:.3f} us/req ({off[1]:,.0f} req/s), "
                      f"with dashboard + tab {on[0]:.3f} us/req ({on[1]:,.0f} req/s), ratio {on[0] / off[0]:.3f}",
                      flush=True)
        finally:
            benchlib.stop(server)
        rows.extend(table_rows(case["name"], results))
    load = os.getloadavg()[0]
    setup = (f"{a.rounds} alternating rounds of {a.secs} s per case against `volley serve` /hi; volley column: with "
             f"`--dashboard` and a chromium tab following each run to its final report"
             + (", and the metric outputs on (remote write, OTLP, --metrics-addr)" if outputs else "")
             + f"; load average {load:.1f} at the end"
             + (" (the machine was shared with other helpers' builds)" if load > 1.5 else ""))
    benchlib.publish(START_MARK, END_MARK, setup, "without the dashboard", rows, write=not a.no_write)


def table_rows(name, results):
    off = statistics.median(r[0] for r in results[False])
    on = statistics.median(r[0] for r in results[True])
    ratios = [w[0] / wo[0] for w, wo in zip(results[True], results[False])]
    rps = {k: statistics.median(r[1] for r in v) for k, v in results.items()}
    return [
        f"| {name}: CPU per request, median | {on:.3f} us ({rps[True]:,.0f} req/s) | "
        f"{off:.3f} us ({rps[False]:,.0f} req/s) | {on / off:.3f} | <= 1.02 | {'yes' if on / off <= 1.02 else '**no**'} |",
        f"| the same, each round's ratio | {', '.join(f'{x:.3f}' for x in ratios)} | | "
        f"{min(ratios):.3f}-{max(ratios):.3f} | | |",
    ]


if __name__ == "__main__":
    main()
