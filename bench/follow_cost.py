"""What `volley merge --follow` costs on many shards (see follow-cost.sh)."""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time

import benchlib

VOLLEY = str(benchlib.VOLLEY)
START_MARK = "<!-- follow-cost: start -->"
END_MARK = "<!-- follow-cost: end -->"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + sys of a running process so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command's closing parenthesis, utime and stime are the 12th and 13th fields.
    return (int(fields[11]) + int(fields[12])) / TICKS


def record(shards, secs, workdir):
    """Runs `shards` real shards of one run, each streaming to rec-I.jsonl;
    returns the files and the requests their reports add up to."""
    port = benchlib.free_port()
    server = benchlib.start_pinned([VOLLEY, "serve", "--addr", f"127.0.0.1:{port}"], "0-" + str(os.cpu_count() - 1),
                                   [port])
    start = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=8)
    start_at = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    procs = []
    try:
        for i in range(shards):
            procs.append(subprocess.Popen(
                [VOLLEY, "run", "--shard", f"{i}/{shards}", "--start-at", start_at, "--start-tolerance", "3s",
                 "-c", str(shards), "-R", str(10 * shards), "-t", "1", "-d", f"{secs}s", "-q",
                 "--stream", f"{workdir}/rec-{i}.jsonl", "-o", f"{workdir}/r-{i}.json",
                 f"http://127.0.0.1:{port}/hi"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=secs + 60)
            if proc.returncode != 0:
                raise SystemExit(f"a recording shard failed: {err.strip()}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        benchlib.stop(server)
    requests = sum(json.load(open(f"{workdir}/r-{i}.json"))["runs"][0]["summary"]["requests"]
                   for i in range(shards))
    return [f"{workdir}/rec-{i}.jsonl" for i in range(shards)], requests


def schedule(recorded):
    """Every recorded line with the second it is appended at in the replay:
    the header and run lines at once, interval k at k+1 s, the end of a URL
    and of the run half a second after its last interval."""
    timed, last_k = [], 0
    for index, path in enumerate(recorded):
        for text in open(path):
            line = json.loads(text)
            if line["type"] == "interval":
                last_k = max(last_k, line["k"])
                at = line["k"] + 1.0
            elif line["type"] in ("run_end", "end"):
                at = None
            else:
                at = 0.0
            timed.append([at, index, text])
    for entry in timed:
        if entry[0] is None:
            entry[0] = last_k + 1.5
    timed.sort(key=lambda e: e[0])
    return timed, last_k


def replay(timed, files, t0):
    handles = [open(path, "a") for path in files]
    for at, index, text in timed:
        delay = t0 + at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        handles[index].write(text)
        handles[index].flush()
    for h in handles:
        h.close()


def one_round(recorded, timed, last_k, requests, workdir, limit_s):
    """Replays the recording into fresh files with the follower and `tail -F`
    on them; returns each one's CPU share of one core while following (from
    the first interval to the last), and the follower's over its whole run."""
    rdir = tempfile.mkdtemp(dir=workdir)
    files = [os.path.join(rdir, f"s-{i}.jsonl") for i in range(len(recorded))]
    out = os.path.join(rdir, "merged.json")
    started = time.monotonic()
    follower = subprocess.Popen([VOLLEY, "merge", "--follow", *files, "-o", out],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tail = subprocess.Popen(["tail", "-q", "-F", "-n", "+1", *files],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killer = threading.Timer(limit_s, follower.kill)
    killer.start()
    t0 = time.monotonic() + 0.5
    writer = threading.Thread(target=replay, args=(timed, files, t0))
    writer.start()
    # The window: from just after interval 0 arrives to just after the last one.
    time.sleep(max(0.0, t0 + 1.2 - time.monotonic()))
    a = (time.monotonic(), cpu_seconds(follower.pid), cpu_seconds(tail.pid))
    time.sleep(max(0.0, t0 + last_k + 1.2 - time.monotonic()))
    b = (time.monotonic(), cpu_seconds(follower.pid), cpu_seconds(tail.pid))
    writer.join()
    err = follower.stderr.read()
    _, status, usage = os.wait4(follower.pid, 0)
    ended = time.monotonic()
    killer.cancel()
    benchlib.stop(tail)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the follower failed or ran past {limit_s} s: {err.strip()}")
    merged = json.load(open(out))["runs"][0]["summary"]["requests"]
    if merged != requests:
        raise SystemExit(f"the follower's report has {merged} requests, the shards' reports {requests}")
    wall = b[0] - a[0]
    return {
        "follow": (b[1] - a[1]) / wall,
        "tail": (b[2] - a[2]) / wall,
        "whole": (usage.ru_utime + usage.ru_stime) / (ended - started),
        "lines": len(recorded) * last_k,
        "window_cpu": b[1] - a[1],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=20)
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        print(f"recording {a.shards} shards for {a.secs} s", flush=True)
        recorded, requests = record(a.shards, a.secs, workdir)
        timed, last_k = schedule(recorded)
        rounds = []
        for r in range(a.rounds):
            res = one_round(recorded, timed, last_k, requests, workdir, a.secs + 60)
            rounds.append(res)
            print(f"  round {r + 1}: follower {100 * res['follow']:.2f}% of a core while following "
                  f"({1e6 * res['window_cpu'] / res['lines']:.0f} us per shard line), "
                  f"{100 * res['whole']:.2f}% over its whole run; tail -F {100 * res['tail']:.2f}%", flush=True)
    follow = statistics.median(r["follow"] for r in rounds)
    tail = statistics.median(r["tail"] for r in rounds)
    whole = statistics.median(r["whole"] for r in rounds)
    per_line = statistics.median(1e6 * r["window_cpu"] / r["lines"] for r in rounds)
    ratio = f"{follow / tail:.1f}" if tail > 0 else "n/a (tail -F used no measurable CPU)"
    rows = [
        f"| `merge --follow` on {a.shards} shards at 1 s intervals: CPU share of one core while following, "
        f"median | {100 * follow:.2f}% ({per_line:.0f} us per shard line) | {100 * tail:.2f}% | {ratio} | "
        f"< 2% | {'yes' if follow < 0.02 else '**no**'} |",
        f"| the same over the follower's whole run (start, {last_k + 1} intervals, final merge of "
        f"{a.shards} reports) | {100 * whole:.2f}% | | | | |",
    ]
    load = os.getloadavg()[0]
    setup = (f"{a.rounds} rounds replaying {a.shards} recorded shard streams ({a.secs} s of `-R {10 * a.shards} "
             f"-c {a.shards}` against `volley serve`, split in {a.shards}) at their 1 s intervals; peer column: "
             f"`tail -F` on the same files in the same rounds; load average {load:.1f} at the end"
             + (" (the machine was shared with other helpers' builds)" if load > 1.5 else ""))
    benchlib.publish(START_MARK, END_MARK, setup, "`tail -F`", rows, write=not a.no_write)


if __name__ == "__main__":
    main()
