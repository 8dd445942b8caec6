#!/usr/bin/env bash
# What sharding costs per request: `volley run --shard 0/1` against a plain
# `volley run` on the same URL, side by side (the target: CPU per
# request of a 1-of-1 shard within 2% of the plain run). nginx (one worker)
# is pinned to the last core, volley to the other with one thread; rounds
# alternate; medians are compared. About a minute; loopback only.
#
#   bench/shard-cost.sh [--rounds N] [--secs N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
install_missing nginx=nginx-light taskset=util-linux
cargo build --release --quiet
exec python3 bench/shard_cost.py "$@"
