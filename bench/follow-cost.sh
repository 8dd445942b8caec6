#!/usr/bin/env bash
# What following a sharded run costs: `volley merge --follow` on 20 shards'
# streams at 1 s intervals, its CPU time over the run as a share of one core
# (user + sys of the whole follower, all its threads). Target: under 2% of a
# core. The 20 streams are recorded once from 20 real shards of one run
# (`volley run --shard I/20 --stream`, against `volley serve` on loopback),
# then replayed line by line on their own schedule (interval k of every
# shard appended at k+1 s), so the follower reads exactly what it would
# read from 20 pods. Side by side, `tail -F` on the same 20 files (what one
# would run to merely watch them) is measured the same way. Each round's
# follower must end on the merged report with every shard's requests, or the
# benchmark stops. The table goes into bench/RESULTS.md (NO_WRITE=1: print
# only). Loopback only; every process is bounded and killed past its limit.
#   bench/follow-cost.sh               # 20 shards, 60 intervals, 3 rounds
#   SHARDS=20 SECS=30 ROUNDS=1 NO_WRITE=1 bench/follow-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/follow_cost.py --shards "${SHARDS:-20}" --secs "${SECS:-60}" --rounds "${ROUNDS:-3}" ${NO_WRITE:+--no-write}
