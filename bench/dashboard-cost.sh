#!/usr/bin/env bash
# What the live dashboard costs the run: the same closed-model run against
# `volley serve` with and without --dashboard (and a chromium tab following
# it), alternating rounds, comparing volley's CPU time per request (user +
# sys of the whole volley process, all its threads). Issue 16's target:
# within 2%. volley runs pinned to one core; `volley serve` and chromium
# share the other. Each round with the dashboard must see the tab follow the
# run to its final report (same request count), or the benchmark stops. The
# table goes into bench/RESULTS.md (NO_WRITE=1: print only). Loopback only;
# every run is bounded by -d and killed 60 s past it.
# OUTPUTS=1 also turns on the metric outputs in the measured runs: remote
# write to a local Prometheus, OTLP to the collector .ci/otel-collector
# built (when there), and --metrics-addr.
#   bench/dashboard-cost.sh            # 3 rounds of 60 s each way
#   ROUNDS=2 SECS=20 OUTPUTS=1 bench/dashboard-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
python="${VOLLEY_BROWSER_PYTHON:-target/browser-venv/bin/python}"
[ -x "$python" ] || { echo "error: no Playwright venv: run .ci/run once, or set VOLLEY_BROWSER_PYTHON" >&2; exit 1; }
exec "$python" bench/dashboard_cost.py --rounds "${ROUNDS:-3}" --secs "${SECS:-60}" ${NO_WRITE:+--no-write} ${OUTPUTS:+--outputs}
