#!/usr/bin/env bash
# The open model's own lag (the pacer's lateness), at two sampling intervals,
# side by side (see pacer_lag.py). Installs Debian's nginx-light and GNU time
# when missing. Every load targets 127.0.0.1 only and every run is bounded in
# time; the default (3 rounds of two 6 s runs) takes about a minute.
#
#   bench/pacer-lag.sh                          # -R 40000 -t 1, --interval 1s vs 100ms
#   bench/pacer-lag.sh --rate 20000 --rounds 5
#   bench/pacer-lag.sh --baseline /tmp/volley-before   # also an earlier build, alternately
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing nginx=nginx-light /usr/bin/time=time taskset=util-linux
cargo build --release --quiet
exec python3 bench/pacer_lag.py "$@"
