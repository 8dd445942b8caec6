#!/usr/bin/env python3
"""`volley plan` vs `volley run` on the same URL (see plan-speed.sh)."""

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import benchlib
import vs_peers  # the nginx target of the peer benchmark

STATIC_PLAN = """base: '{base}'
plan:
  - name: Hi
    request:
      url: /hi
"""

# One variable per request: the iteration number in the query string.
TEMPLATED_PLAN = """base: '{base}'
plan:
  - name: Hi
    request:
      url: /hi?i={{{{ iteration }}}}
"""


# drill's form of the static plan: the same request, 50 connections, a
# number of iterations instead of a duration (drill has no duration).
DRILL_PLAN = """base: '{base}'
concurrency: 50
iterations: {iterations}
plan:
  - name: Hi
    request:
      url: /hi
"""


def volley(args, core, secs):
    """Returns (req/s, CPU microseconds per request, peak RSS MB) of one run."""
    cmd = [str(benchlib.VOLLEY), *args, "-c", "50", "-t", "1", "-d", f"{secs}s", "--json"]
    out, cpu, rss = benchlib.measured(cmd, core, secs + 60)
    if out.returncode != 0:
        raise SystemExit(f"volley failed: {out.stderr.strip()}")
    summary = json.loads(out.stdout)["runs"][0]["summary"]
    return summary["rps"], 1e6 * cpu / max(summary["requests"], 1), rss / 1024


def drill(binary, plan, iterations, core):
    """drill on the same plan, pinned like volley: (req/s, CPU us per request,
    peak RSS MB). Its req/s is its requests over the run's wall time."""
    started = time.monotonic()
    out, cpu, rss = benchlib.measured([binary, "--benchmark", plan, "-q"], core, 600)
    wall = time.monotonic() - started
    if out.returncode != 0:
        raise SystemExit(f"drill failed: {out.stderr.strip()[:500]}")
    return iterations / wall, 1e6 * cpu / iterations, rss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5)
    ap.add_argument("--drill", default=shutil.which("drill"),
                    help="drill's binary, a peer on the same static plan [drill on PATH; none: skipped]")
    ap.add_argument("--drill-iterations", type=int, default=250_000,
                    help="drill's requests per round (it has no duration) [250000]")
    args = ap.parse_args()
    target_core, gen = benchlib.split_cores()
    workdir = benchlib.scratch_dir(prefix="volley-plan-bench-")
    target = vs_peers.Target("nginx", target_core, workdir)
    base = target.url.rsplit("/", 1)[0]
    plans = {}
    for name, text in (("static", STATIC_PLAN), ("templated", TEMPLATED_PLAN)):
        path = Path(workdir) / f"{name}.yml"
        path.write_text(text.format(base=base))
        plans[name] = str(path)
    drill_plan = Path(workdir) / "drill.yml"
    drill_plan.write_text(DRILL_PLAN.format(base=base, iterations=args.drill_iterations))
    rps = {"run": [], "static": [], "templated": []}
    cpu = {"run": [], "static": [], "templated": []}
    rss = {"static": []}
    if args.drill:
        rps["drill"], cpu["drill"], rss["drill"] = [], [], []
    try:
        for r in range(args.rounds):
            for name, cmd in (("run", ["run", target.url]), ("static", ["plan", plans["static"]]),
                              ("templated", ["plan", plans["templated"]])):
                r_rps, r_cpu, r_rss = volley(cmd, gen, args.secs)
                rps[name].append(r_rps)
                cpu[name].append(r_cpu)
                if name in rss:
                    rss[name].append(r_rss)
            if args.drill:
                d_rps, d_cpu, d_rss = drill(args.drill, str(drill_plan), args.drill_iterations, gen)
                rps["drill"].append(d_rps)
                cpu["drill"].append(d_cpu)
                rss["drill"].append(d_rss)
            print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f} req/s {cpu[k][-1]:.2f} us/req"
                                                  for k, v in rps.items()), flush=True)
    finally:
        target.stop()
    med = {k: statistics.median(v) for k, v in rps.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print()
    print("nginx's one core caps req/s near 225k here, so CPU per request (volley's own")
    print("user + sys over its requests) is the figure that shows interpolation's cost.")
    print()
    print("| case | req/s (ratio) | CPU per request (ratio) | target | met |")
    print("|---|---|---|---|---|")
    print(f"| `volley run` /hi, 50 connections, 1 thread | {med['run']:,.0f} | {mcpu['run']:.2f} us | | |")
    for name, limit in (("static", 0.10), ("templated", 0.25)):
        speed = med[name] / med["run"]
        cost = mcpu[name] / mcpu["run"]
        ok = speed >= 1 - limit and cost <= 1 + limit
        label = "static one-request plan" if name == "static" else "templated plan (one variable per request)"
        print(f"| {label} | {med[name]:,.0f} ({speed:.2f}) | {mcpu[name]:.2f} us ({cost:.2f}) | "
              f"within {limit:.0%} of `volley run` | {'yes' if ok else '**no**'} |")
    if args.drill:
        mrss = {k: max(v) for k, v in rss.items()}
        print()
        print("drill as a peer: the same static plan (50 connections), drill pinned like volley.")
        print()
        print("| tool | req/s | CPU per request | peak RSS |")
        print("|---|---|---|---|")
        print(f"| volley plan (static) | {med['static']:,.0f} | {mcpu['static']:.2f} us | {mrss['static']:.0f} MB |")
        print(f"| drill | {med['drill']:,.0f} | {mcpu['drill']:.2f} us | {mrss['drill']:.0f} MB |")
        print(f"| volley / drill | {med['static'] / med['drill']:.1f}x | "
              f"{mcpu['static'] / mcpu['drill']:.2f}x | {mrss['static'] / mrss['drill']:.2f}x |")


if __name__ == "__main__":
    main()
