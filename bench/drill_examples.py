#!/usr/bin/env python3
"""drill's own example files, run unchanged by drill and by `volley plan`
against drill's own example server on 127.0.0.1: the per-item request counts
must be equal (see drill-examples.sh).

Nothing of drill's is copied into this repository: the examples and the
server are read from a drill checkout given on the command line, copied to a
temporary directory, and only their base URL is pointed at 127.0.0.1.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

PORT = 9000  # drill's example server listens there (hard-coded in it)

# Preloaded into node: every numeric listen() binds 127.0.0.1 only, so the
# example server is never reachable from outside this machine.
LOOPBACK_ONLY = """
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  if (typeof port !== 'number') return listen.call(this, port, ...rest);
  return listen.call(this, port, '127.0.0.1', ...rest.filter((a) => typeof a === 'function'));
};
"""

# (file, extra flags for both tools, environment): every example drill runs.
CASES = [
    ("benchmark.yml", [], {}),
    ("cookies.yml", [], {}),
    ("delay.yml", [], {}),
    ("env.yml", [], {"ITERATIONS": "3", "EDITOR": "users"}),
    ("headers.yml", [], {}),
    ("iterations.yml", [], {}),
    ("tags.yml", [], {}),
    ("tags.yml", ["--tags", "tag_user"], {}),
    ("tags.yml", ["--skip-tags", "tag_user"], {}),
    ("tags.yml", ["--tags", "never"], {}),
    ("throughput.yml", [], {}),  # drill: 10,000 connections at once (its default)
]

TIMEOUT = 180  # seconds, per run: every example is bounded in iterations too


def drill_counts(drill, plan, flags, env):
    """Per-item requests from drill's --stats output."""
    out = subprocess.run([drill, "--benchmark", str(plan), "--stats", "-q", *flags], capture_output=True,
                         text=True, timeout=TIMEOUT, env=env, cwd=plan.parent)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)
    counts = {}
    for line in text.splitlines():
        m = re.match(r"^(?:(.*\S)\s+)?Total requests\s+(\d+)$", line)
        if m:
            counts[m.group(1) or "Total requests"] = int(m.group(2))
    if out.returncode != 0 or not counts:
        if "hdrhistogram" in out.stderr:
            return drill_lines(drill, plan, flags, env)
        return None, (out.stderr.strip().splitlines() or ["no statistics"])[0]
    return counts, None


def drill_lines(drill, plan, flags, env):
    """Per-item requests from drill's line per request (for the files whose
    --stats panics in drill's histogram code, such as throughput.yml)."""
    out = subprocess.run([drill, "--benchmark", str(plan), *flags], capture_output=True, text=True,
                         timeout=TIMEOUT, env=env, cwd=plan.parent)
    counts, name_of, failed = {}, {}, {}
    for line in re.sub(r"\x1b\[[0-9;]*m", "", out.stdout).splitlines():
        m = re.match(r"^(.*?)\s+(https?://\S+) \d{3} .*\d+ms$", line)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
            name_of[m.group(2)] = m.group(1)
        # A request that failed (drill prints its URL, not its item's name).
        m = re.match(r"^Error connecting '(\S+)'", line)
        if m:
            failed[m.group(1)] = failed.get(m.group(1), 0) + 1
    for url, n in failed.items():
        name = name_of.get(url, url)
        counts[name] = counts.get(name, 0) + n
    if out.returncode != 0 or not counts:
        return None, (out.stderr.strip().splitlines() or ["no requests"])[0]
    counts["Total requests"] = sum(counts.values())
    return counts, None


def volley_counts(plan, flags, env, workdir):
    """Per-item requests (and a total) from volley's JSON report."""
    report = Path(workdir) / "volley.json"
    out = subprocess.run([str(benchlib.VOLLEY), "plan", str(plan), "-q", "-o", str(report), *flags],
                         capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=plan.parent)
    if not report.exists():
        return None, (out.stderr.strip().splitlines() or ["no report"])[-1]
    run = json.loads(report.read_text())["runs"][0]
    report.unlink()
    # drill's statistics list HTTP requests only: leave out the steps that
    # sent none (asserts, assigns, delays and exec, which have no status).
    counts = {s["name"]: s["summary"]["requests"] for s in run["steps"]
              if s["summary"]["status"] or set(s["summary"]["errors_by_kind"]) - {"exec", "assert"}}
    counts["Total requests"] = run["summary"]["requests"]
    return counts, None


def start_server(repo, workdir):
    server = Path(workdir) / "server"
    shutil.copytree(Path(repo) / "example" / "server", server)
    (server / "loopback-only.js").write_text(LOOPBACK_ONLY)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=server, check=True,
                   timeout=300)
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", PORT)) == 0:
            raise SystemExit(f"port {PORT} is busy: drill's example server needs it")
    proc = subprocess.Popen(["node", "-r", "./loopback-only.js", "server.js"], cwd=server,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", PORT)) == 0:
                return proc
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("drill's example server did not start on 127.0.0.1:9000")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drill-repo", required=True, help="a checkout of fcsonline/drill")
    ap.add_argument("--drill", help="drill's binary [DRILL_REPO/target/release/drill]")
    ap.add_argument("--only", help="run only this example file (e.g. tags.yml)")
    args = ap.parse_args()
    drill = args.drill or str(Path(args.drill_repo) / "target" / "release" / "drill")
    workdir = tempfile.mkdtemp(prefix="volley-drill-examples-")
    examples = Path(workdir) / "example"
    shutil.copytree(Path(args.drill_repo) / "example", examples, ignore=shutil.ignore_patterns("server"))
    for plan in examples.glob("*.yml"):
        text = plan.read_text()
        # Loopback only: the two examples' hosts become 127.0.0.1.
        text = text.replace("localhost:9000", f"127.0.0.1:{PORT}").replace("localhost:3000", f"127.0.0.1:{PORT}")
        plan.write_text(text)
    server = start_server(args.drill_repo, workdir)
    failed = 0
    try:
        print("| example | flags | drill total | volley total | per-item counts |")
        print("|---|---|---|---|---|")
        for name, flags, extra_env in CASES:
            if args.only and name != args.only:
                continue
            env = {**os.environ, **extra_env}
            plan = examples / name
            d, d_err = drill_counts(drill, plan, flags, env)
            v, v_err = volley_counts(plan, flags, env, workdir)
            if d is None and v is None and "Empty benchmark" in d_err and "no plan item left" in v_err:
                print(f"| {name} | {' '.join(flags)} | 0 | 0 | both refuse an empty plan |")
                continue
            if d is None or v is None:
                verdict = f"drill: {d_err}" if d is None else f"volley: {v_err}"
                failed += 1
                print(f"| {name} | {' '.join(flags)} | | | **not run**: {verdict} |")
                continue
            same = d == v
            failed += not same
            diff = "equal" if same else "**differ**: " + ", ".join(
                f"{k}: drill {d.get(k)} volley {v.get(k)}" for k in sorted(set(d) | set(v)) if d.get(k) != v.get(k))
            print(f"| {name} | {' '.join(flags)} | {d['Total requests']:,} | {v['Total requests']:,} | {diff} |",
                  flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
