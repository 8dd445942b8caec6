#!/usr/bin/env python3
"""`volley run --shard 0/1` vs `volley run` on the same URL (see shard-cost.sh)."""

import argparse
import statistics

import benchlib
import vs_peers  # the nginx target of the peer benchmark
from plan_speed import volley  # one measured run: (req/s, CPU us per request)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--secs", type=int, default=5)
    args = ap.parse_args()
    target_core, gen = benchlib.split_cores()
    target = vs_peers.Target("nginx", target_core, benchlib.scratch_dir(prefix="volley-shard-bench-"))
    cases = {"plain": ["run", target.url], "shard 0/1": ["run", target.url, "--shard", "0/1"]}
    rps = {k: [] for k in cases}
    cpu = {k: [] for k in cases}
    try:
        for r in range(args.rounds):
            for name, cmd in cases.items():
                r_rps, r_cpu = volley(cmd, gen, args.secs)
                rps[name].append(r_rps)
                cpu[name].append(r_cpu)
            print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f} req/s {cpu[k][-1]:.3f} us/req"
                                                  for k, v in rps.items()), flush=True)
    finally:
        target.stop()
    med = {k: statistics.median(v) for k, v in rps.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    ratio = mcpu["shard 0/1"] / mcpu["plain"]
    print()
    print("| case | req/s | CPU per request | ratio to plain | target | met |")
    print("|---|---|---|---|---|---|")
    print(f"| `volley run` /hi, 50 connections, 1 thread | {med['plain']:,.0f} | {mcpu['plain']:.3f} us | 1.000 | | |")
    print(f"| the same with `--shard 0/1` | {med['shard 0/1']:,.0f} | {mcpu['shard 0/1']:.3f} us | {ratio:.3f} | "
          f"within 2% | {'yes' if ratio <= 1.02 else '**no**'} |")


if __name__ == "__main__":
    main()
