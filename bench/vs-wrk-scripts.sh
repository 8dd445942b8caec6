#!/usr/bin/env bash
# volley run -s against wrk with the same Lua scripts, side by side on this
# machine (see vs_wrk_scripts.py). Installs Debian's wrk, nginx-light and
# GNU time when missing. Every load targets 127.0.0.1 only and every run is
# bounded in time; the whole script takes about 2 minutes.
#
#   bench/vs-wrk-scripts.sh              # 5 rounds of 3 s, writes bench/RESULTS.md
#   bench/vs-wrk-scripts.sh --no-write --rounds 3
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing wrk=wrk nginx=nginx-light /usr/bin/time=time taskset=util-linux
cargo build --release --quiet
exec python3 bench/vs_wrk_scripts.py "$@"
