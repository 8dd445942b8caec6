#!/usr/bin/env bash
# What interpolation costs: `volley plan` against `volley run` on the same
# URL, side by side (the targets: a static one-request plan within 10%
# of `volley run`, a templated plan, one variable per request, within 25%).
# nginx (one worker) is pinned to the last core, volley to the other with one
# thread; rounds alternate; medians are compared. About a minute; loopback only.
#
#   bench/plan-speed.sh [--rounds N] [--secs N] [--drill PATH] [--drill-iterations N]
#
# With drill on PATH (or --drill), drill runs the same static plan as a peer,
# pinned like volley: req/s, CPU per request and peak RSS side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
install_missing nginx=nginx-light taskset=util-linux
cargo build --release --quiet
exec python3 bench/plan_speed.py "$@"
