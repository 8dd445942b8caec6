"""What the benchmark scripts share: pinned processes, nginx's configuration,
running a generator under GNU time, wrk's and volley's figures, the machine's
description and the tables in bench/RESULTS.md.

Every load goes to 127.0.0.1 and every generator run is bounded by its own
duration plus a hard timeout.
"""

import atexit
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where `cargo build --release` puts volley (CARGO_TARGET_DIR, relative to the
# repository like cargo's, when set).
VOLLEY = ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "volley"
RESULTS = ROOT / "bench" / "RESULTS.md"

# `workers` workers (one unless a benchmark asks for more), no logs,
# connections kept open for as long as a run lasts; the `servers` are the
# server blocks (and any http-level directives).
NGINX_CONF = """
worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log error;
worker_rlimit_nofile 65536;
events {{ worker_connections 30000; multi_accept on; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_body_temp_path {dir};
  proxy_temp_path {dir};
  fastcgi_temp_path {dir};
  uwsgi_temp_path {dir};
  scgi_temp_path {dir};
{servers}
}}
"""

# nginx's server block for the plain benchmarks: `/` answers 200 with a
# 5-byte body on 127.0.0.1:{port}.
NGINX_HELLO = """
  server {{
    listen 127.0.0.1:{port} backlog=32768;
    location / {{ return 200 "world"; }}
  }}"""

# A pipelining script for wrk written for this benchmark: `depth` copies of
# the request sent in one write.
WRK_PIPELINE_LUA = """
init = function(args)
  local depth = tonumber(args[1]) or 16
  local parts = {{}}
  for i = 1, depth do parts[i] = wrk.format() end
  batch = table.concat(parts)
end
request = function() return batch end
"""


def split_cores():
    """The cores this process may use, split as the benchmarks pin: the last
    for the target, the rest (the same one on a single core) for the
    generator, as a taskset list."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1], ",".join(str(c) for c in cpus[:-1]) or str(cpus[-1])


def scratch_dir(prefix):
    """A private temporary folder (nginx's configuration, logs and pid file,
    a run's reports), removed when the script exits, however it exits short
    of being killed."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, limit=10.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"target did not start listening on 127.0.0.1:{port}")


def start_pinned(cmd, core, ports):
    """Starts a server pinned to `core` and waits until each of `ports` accepts."""
    proc = subprocess.Popen(
        ["taskset", "-c", str(core)] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for port in ports:
            wait_listening(port)
    except SystemExit:
        stop(proc)
        raise
    return proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_nginx(core, workdir, servers, ports, workers=1):
    """nginx with NGINX_CONF around `servers`, pinned to `core` (a core, or a
    list taskset takes, such as "6-15"), its files in `workdir`."""
    conf = Path(workdir) / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=workdir, servers=servers, workers=workers))
    return start_pinned(["nginx", "-c", str(conf), "-p", workdir], core, ports)


class CpuTime(float):
    """A process's CPU seconds (user and system together), with each part:
    `user` (its own code) and `system` (the kernel's work for it), and the
    TCP segments and UDP datagrams the whole machine sent while it ran
    (`segments`, `datagrams`; over loopback, every packet of its
    connections, both ways, is one of them)."""

    def __new__(cls, user, system, sent=(0, 0)):
        cpu = super().__new__(cls, user + system)
        cpu.user, cpu.system = user, system
        cpu.segments, cpu.datagrams = sent
        return cpu


def packets_sent():
    """The machine's counts of TCP segments and UDP datagrams sent
    (`OutSegs` and `OutDatagrams` in /proc/net/snmp)."""
    lines = Path("/proc/net/snmp").read_text().splitlines()

    def counter(protocol, name):
        names, values = (line.split() for line in lines if line.startswith(f"{protocol}:"))
        return int(values[names.index(name)])

    return counter("Tcp", "OutSegs"), counter("Udp", "OutDatagrams")


def measured(cmd, cores, limit):
    """Runs a generator pinned to `cores`; returns the finished process and its
    own CPU seconds (a `CpuTime`) and peak RSS (KiB). If it still runs after
    `limit` seconds it is killed with everything it started, and the
    benchmark stops."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        full = ["/usr/bin/time", "-f", "%U %S %M", "-o", tf.name, "taskset", "-c", cores] + cmd
        before = packets_sent()
        proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=limit)
        except BaseException as e:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                raise SystemExit(f"{cmd[0]} still ran after {limit} s and was killed: {' '.join(cmd)}")
            raise
        sent = tuple(after - then for after, then in zip(packets_sent(), before))
        fields = Path(tf.name).read_text().split()
        user, sys_, rss_kb = float(fields[-3]), float(fields[-2]), int(fields[-1])
    return subprocess.CompletedProcess(full, proc.returncode, out, err), CpuTime(user, sys_, sent), rss_kb


def volley_figures(cmd, cores, limit):
    """Runs a `volley ... --json` command line and returns its figures."""
    proc, cpu, rss = measured(cmd, cores, limit)
    try:
        summary = json.loads(proc.stdout)["runs"][0]["summary"]
    except (json.JSONDecodeError, KeyError, IndexError):
        raise SystemExit(f"volley failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
    return {
        "rps": summary["rps"],
        "requests": summary["requests"],
        "errors": summary["errors"],
        "bad_status": sum(n for code, n in summary["status"].items() if not code.startswith("2")),
        "p50_ms": summary["latency_ms"]["p50"],
        "p99_ms": summary["latency_ms"]["p99"],
        "cpu_us_per_req": 1e6 * cpu / max(summary["requests"], 1),
        "user_us_per_req": 1e6 * cpu.user / max(summary["requests"], 1),
        "segments_per_req": cpu.segments / max(summary["requests"], 1),
        "datagrams_per_req": cpu.datagrams / max(summary["requests"], 1),
        "rss_mb": rss / 1024,
    }


def oha_figures(cmd, cores, limit):
    """Runs an `oha --no-tui --output-format json ...` command line and returns
    its figures. Requests and req/s count the responses: oha also counts
    the requests a `-z` deadline cut short ("aborted due to deadline"),
    which are neither errors nor answered."""
    proc, cpu, rss = measured(cmd, cores, limit)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"oha failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
    answered = sum(data.get("statusCodeDistribution", {}).values())
    errors = {k: v for k, v in data.get("errorDistribution", {}).items() if k != "aborted due to deadline"}
    return {
        "rps": answered / data["summary"]["total"],
        "requests": answered,
        "errors": sum(errors.values()),
        "error_names": sorted(errors),
        "p50_ms": data["latencyPercentiles"]["p50"] * 1000,
        "cpu_us_per_req": 1e6 * cpu / max(answered, 1),
        "user_us_per_req": 1e6 * cpu.user / max(answered, 1),
        "datagrams_per_req": cpu.datagrams / max(answered, 1),
        "rss_mb": rss / 1024,
    }


def to_ms(value, unit):
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def run_wrk(url, conns, secs, cores, pipeline=None, threads=1, headers=(), lua=None):
    """wrk's figures; `lua`: a script of the caller's to run (`-s`)."""
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--latency", "--timeout", "30s"]
    for header in headers:
        cmd += ["-H", header]
    if lua:
        cmd += ["-s", str(lua)]
    script = None
    if pipeline:
        script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
        script.write(WRK_PIPELINE_LUA)
        script.close()
        cmd += ["-s", script.name]
    cmd.append(url)
    if pipeline:
        cmd += ["--", str(pipeline)]
    proc, cpu, rss = measured(cmd, cores, secs + 60)
    if script:
        os.unlink(script.name)
    out = proc.stdout
    total = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if not (total and rps):
        raise SystemExit(f"wrk failed: {out} {proc.stderr}")
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    # wrk counts only responses outside 2xx and 3xx.
    bad_status = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(rps.group(1)),
        "requests": int(total.group(1)),
        "errors": sum(int(g) for g in errors.groups()) if errors else 0,
        "bad_status": int(bad_status.group(1)) if bad_status else 0,
        "p50_ms": to_ms(*p50.groups()) if p50 else float("nan"),
        "cpu_us_per_req": 1e6 * cpu / max(int(total.group(1)), 1),
        "rss_mb": rss / 1024,
    }


def alternate(name, tools, rounds, run):
    """Runs every tool once per round, the tools in turn within each round
    (so drifts in the machine's speed hit all alike), printing each result;
    `run(tool, fn)` runs one. Returns {tool: [result per round]}.

    Every other round runs them in the reverse order: whatever favours a
    place in the round then favours each tool alike. Two builds of
    volley compared in a fixed order over 8 rounds read 1.08x and 1.10x
    each other's CPU per request one way round and 0.84x and 0.94x the
    other (the same build against itself read 1.05x and 1.00x), a lean
    within the spread of single rounds (0.7x to 1.4x) that the fixed order
    gave to the same tool every time."""
    results = {tool: [] for tool, _ in tools}
    for r in range(rounds):
        for tool, fn in (tools if r % 2 == 0 else tools[::-1]):
            res = run(tool, fn)
            results[tool].append(res)
            # A tool that prints no median (h2load) has none to show.
            p50 = "" if math.isnan(res["p50_ms"]) else f"p50 {res['p50_ms']:.3f} ms, "
            print(f"  {name} round {r + 1} {tool}: {res['rps']:,.0f} req/s, "
                  f"{res['cpu_us_per_req']:.2f} us/req, {p50}"
                  f"{res['rss_mb']:.1f} MB, {res['errors']} errors", flush=True)
    return results


def median(rounds, key):
    return statistics.median(r[key] for r in rounds)


class CaseRows:
    """One case's rows of a results table, from its rounds (`alternate`'s
    result): the medians of a tool's figures, and `add` for a row."""

    def __init__(self, label, rounds, rows):
        self.label, self.rounds, self.rows = label, rounds, rows

    def cpu(self, tool):
        return median(self.rounds[tool], "cpu_us_per_req")

    def rps(self, tool):
        return median(self.rounds[tool], "rps")

    def add(self, what, v, peer, ratio, target, met=None):
        verdict = "" if met is None else ("yes" if met else "no")
        self.rows.append(f"| {self.label}: {what} | {v} | {peer} | {ratio:.2f} | {target} | {verdict} |")

    def add_baseline(self, tool, baseline="baseline"):
        """Two reported rows: `tool` (this build) against `baseline` (an
        earlier build in the same rounds with the same arguments), CPU per
        request and req/s, as this build / the baseline."""
        self.add("CPU/request, this build vs the baseline build", f"{self.cpu(tool):.2f} us",
                 f"{self.cpu(baseline):.2f} us", self.cpu(tool) / self.cpu(baseline), "reported")
        self.add("req/s, this build vs the baseline build", f"{self.rps(tool):,.0f}", f"{self.rps(baseline):,.0f}",
                 self.rps(tool) / self.rps(baseline), "reported")

    def add_packets(self, tool, peer, packets, named):
        """A reported row: the packets (`packets`, the figure's key) the
        machine sent per request while `tool` ran and while `peer` did."""
        mine, theirs = (statistics.median(r[packets] for r in self.rounds[t]) for t in (tool, peer))
        self.add(f"{named} (machine-wide), {tool} vs {peer}", f"{mine:.2f}", f"{theirs:.2f}", mine / theirs,
                 "reported")

    def add_split(self, tool, peer, what):
        """Two reported rows: where `tool`'s and `peer`'s CPU per request goes,
        in user space (the tool's own code) and in the kernel (its system
        calls and the network work done for it); `what` names the pair."""
        for part, of in (("in user space", lambda r: r["user_us_per_req"]),
                         ("in the kernel", lambda r: r["cpu_us_per_req"] - r["user_us_per_req"])):
            mine, theirs = (statistics.median(of(r) for r in self.rounds[t]) for t in (tool, peer))
            self.add(f"CPU/request {part}, {what}", f"{mine:.2f} us", f"{theirs:.2f} us", mine / theirs, "reported")

    def add_floor(self, tool, peer, packets="segments_per_req", named="TCP segments/request"):
        """Two reported rows on how far `tool`'s CPU per request can fall
        against `peer`'s: the packets (`packets`, the figure's key, `named`
        as the table says) each put on the wire per request (the same
        packets mean the same work for the kernel's network stack), and
        `peer`'s kernel time as a share of its CPU per request, which is
        the ratio `tool` would reach with that kernel time and no user
        space at all."""
        self.add_packets(tool, peer, packets, named)
        kernel = statistics.median((r["cpu_us_per_req"] - r["user_us_per_req"]) / r["cpu_us_per_req"]
                                   for r in self.rounds[peer])
        self.add(f"{peer}'s kernel time over its CPU/request: the ratio with no user space and its kernel time",
                 "", "", kernel, "reported")


def baseline_arg(ap, args):
    """`--baseline`'s binary, checked: an executable file, or a usage error
    (exit 2) before anything starts. The .sh wrappers run from the
    repository's root, so a relative path is taken from there."""
    if args.baseline and not (os.path.isfile(args.baseline) and os.access(args.baseline, os.X_OK)):
        ap.error(f"--baseline: {args.baseline} is not an executable file")
    return args.baseline


def version(cmd):
    """A tool's version as it prints it (`wrk -v`, `h2load --version`, `nginx -v`)."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = (out.stdout + out.stderr).strip().splitlines()
    return lines[0].split("[")[0].strip() if lines else cmd[0]


def machine():
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({model}), Linux {platform.release()}"


def publish(start_mark, end_mark, setup, peer, rows, write=True, header=True):
    """Prints the table of `rows` (volley against `peer`; without `header`,
    rows that carry their own header) under a line saying when, where and
    how (`setup`), and puts both between the markers in RESULTS.md (added at
    its end when missing) if `write`."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"| case | volley | {peer} | ratio | target | met |", "|---|---|---|---|---|---|"] if header else []
    table = "\n".join([f"Measured {when} on {machine()}, {setup}", "", *head, *rows])
    print()
    print(table)
    if not write:
        return
    doc = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    if start_mark not in doc:
        doc = f"{doc.rstrip()}\n\n{start_mark}\n{end_mark}\n"
    head, _, rest = doc.partition(start_mark)
    _, _, tail = rest.partition(end_mark)
    RESULTS.write_text(f"{head}{start_mark}\n{table}\n{end_mark}{tail}")
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
