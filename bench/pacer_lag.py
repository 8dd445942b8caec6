#!/usr/bin/env python3
"""The open model's own lag: how late volley's pacer is, per sampling interval.

Under `-R` volley measures latency from each request's intended send time, so
any lateness of volley itself lands in the figures users read as the
server's. This runs the same open-model load with `--interval 1s` and with
`--interval 100ms` (alternating, round by round, so drifts in machine speed
hit both alike) and prints the pacer's lag (p50, p99, max), the requests sent
1 ms or more late, and the latency p99 next to the service-time p99; then the
ratio of the lag p99 between the two intervals. A short interval means more
per-interval work (snapshot swaps, merges, the live view, the sinks): the
ratio shows whether that work disturbs the schedule.

nginx (one worker) is pinned to the last core, volley (all its threads) to the
others. Every load goes to 127.0.0.1 and every run is bounded by its duration
plus a hard timeout.
"""

import argparse
import os
import statistics
import sys

from benchlib import NGINX_HELLO, VOLLEY, free_port, measured, scratch_dir, split_cores, start_nginx, stop


def busy_jiffies(cores):
    """CPU time spent (user, nice, system, irq, softirq, steal) on `cores`
    since boot, in clock ticks, from /proc/stat."""
    wanted = {f"cpu{c}" for c in cores}
    total = 0
    for line in open("/proc/stat"):
        fields = line.split()
        if fields and fields[0] in wanted:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
            total += user + nice + system + irq + softirq + steal
    return total


def process_cpu_s(pid):
    """CPU seconds (user + system) of a process and its children's threads
    so far: nginx's master and its worker."""
    pids = [pid]
    try:
        pids += [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        pass
    total = 0
    for p in pids:
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def run(url, args, interval, cores, volley=VOLLEY, target=None):
    """One open-model run; its schedule figures from the JSON report, and
    how much CPU time other processes took on volley's cores meanwhile."""
    import json

    cmd = [str(volley), "run", "-R", str(args.rate), "-c", str(args.conns), "--max-connections",
           str(args.max_conns), "-t", str(args.threads), "-d", f"{args.secs}s", "--interval", interval,
           "--json", url]
    core_list = sorted(os.sched_getaffinity(0))
    before, target_before = busy_jiffies(core_list), process_cpu_s(target.pid)
    proc, cpu, _rss = measured(cmd, cores, args.secs + 60)
    target_cpu = process_cpu_s(target.pid) - target_before
    others = max(0.0, (busy_jiffies(core_list) - before) / os.sysconf("SC_CLK_TCK") - cpu - target_cpu)
    try:
        summary = json.loads(proc.stdout)["runs"][0]["summary"]
    except (json.JSONDecodeError, KeyError, IndexError):
        raise SystemExit(f"volley failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
    schedule = summary["schedule"]
    return {
        "sent": schedule["sent"],
        "late": schedule["late"],
        "late_waiting": schedule["late_waiting_for_connection"],
        "lag_p50": schedule["tool_lag_p50_ms"],
        "lag_p99": schedule["tool_lag_p99_ms"],
        "lag_max": schedule["tool_lag_max_ms"],
        "latency_p99": summary["latency_ms"]["p99"],
        "service_p99": summary["service_ms"]["p99"],
        "errors": summary["errors"],
        "cpu_s": cpu,
        # Other processes' share of the machine (volley's and nginx's cores)
        # during the run.
        "others": others / (args.secs * len(core_list)),
    }


def describe(res):
    """One run's schedule figures (`run`'s result) in a line."""
    return (f"lag p50 {res['lag_p50']:.3f} ms, p99 {res['lag_p99']:.3f} ms, max {res['lag_max']:.3f} ms; "
            f"{res['late']:,} of {res['sent']:,} sent late ({res['late_waiting']:,} waiting for a connection); "
            f"latency p99 {res['latency_p99']:.2f} ms, service p99 {res['service_p99']:.2f} ms; "
            f"{res['errors']} errors; others {res['others']:.1%}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=40000, help="requests per second in all")
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--max-conns", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--secs", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--intervals", default="1s,100ms", help="the two sampling intervals compared")
    ap.add_argument("--max-others", type=float, default=0.02,
                    help="repeat a run (up to 3 times) when other processes took more than this share of "
                         "the machine meanwhile: on a shared machine their bursts land in the lag")
    ap.add_argument("--baseline", metavar="BIN",
                    help="another volley binary (an earlier build) run alternately with this one, for a "
                         "before/after comparison")
    args = ap.parse_args()
    intervals = args.intervals.split(",")
    binaries = [("this", VOLLEY)] + ([("baseline", args.baseline)] if args.baseline else [])

    target_core, gen_cores = split_cores()
    workdir = scratch_dir(prefix="volley-pacer-")
    port = free_port()
    nginx = start_nginx(target_core, workdir, NGINX_HELLO.format(port=port), [port])
    url = f"http://127.0.0.1:{port}/hi"
    print(f"nginx on core {target_core}; volley -t {args.threads} on core(s) {gen_cores}; "
          f"-R {args.rate} -c {args.conns} --max-connections {args.max_conns}, {args.secs} s per run")
    results = {(b, i): [] for b, _ in binaries for i in intervals}
    try:
        for r in range(args.rounds):
            for interval in intervals:
              for name, binary in binaries:
                for _attempt in range(3):
                    res = run(url, args, interval, gen_cores, binary, nginx)
                    if res["others"] <= args.max_others:
                        break
                    print(f"  (other processes took {res['others']:.1%} of the machine: run again)", flush=True)
                results[(name, interval)].append(res)
                print(f"  round {r + 1} {name:>8} --interval {interval:>5}: {describe(res)}", flush=True)
    finally:
        stop(nginx)

    def med(name, interval, key):
        return statistics.median(x[key] for x in results[(name, interval)])

    for name, _ in binaries:
        print(f"\n{name} ({'this build' if name == 'this' else args.baseline}), medians of {args.rounds} rounds, ms:")
        print(f"{'interval':>9} {'lag p50':>9} {'lag p99':>9} {'lag max':>9} {'late':>8} {'lat p99':>9} "
              f"{'svc p99':>9} {'CPU s':>6}")
        for interval in intervals:
            print(f"{interval:>9} {med(name, interval, 'lag_p50'):>9.3f} {med(name, interval, 'lag_p99'):>9.3f} "
                  f"{med(name, interval, 'lag_max'):>9.3f} {med(name, interval, 'late'):>8,.0f} "
                  f"{med(name, interval, 'latency_p99'):>9.2f} {med(name, interval, 'service_p99'):>9.2f} "
                  f"{med(name, interval, 'cpu_s'):>6.2f}")
        a, b = intervals[0], intervals[1]
        ratio = med(name, b, "lag_p99") / max(med(name, a, "lag_p99"), 1e-9)
        worst = max(med(name, i, "lag_p99") for i in intervals)
        print(f"lag p99 ratio, --interval {b} / {a}: {ratio:.2f}x; the worse of the two: {worst:.3f} ms")
    if args.baseline:
        print()
        for interval in intervals:
            ratio = med("this", interval, "lag_p99") / max(med("baseline", interval, "lag_p99"), 1e-9)
            print(f"lag p99 at --interval {interval}, this build / baseline: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
