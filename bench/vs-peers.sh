#!/usr/bin/env bash
# volley against its peers, side by side on this machine (see vs_peers.py).
# Installs what it needs when missing: Debian's wrk, nginx-light and GNU time
# (for each process's own CPU and peak RSS); oha only with --with-oha, since
# `cargo install oha` takes minutes. Every load targets 127.0.0.1 only and
# every run is bounded in time; the whole script takes about 4 minutes.
#
#   bench/vs-peers.sh                 # nginx target, 3 rounds, writes bench/RESULTS.md
#   bench/vs-peers.sh --target volley # the embedded target instead of nginx
#   bench/vs-peers.sh --with-oha      # also oha (installs it with cargo if missing)
#   bench/vs-peers.sh --with-shb      # then shb, on both of volley's I/O backends (bench/vs-shb.sh)
#   bench/vs-peers.sh --no-write --baseline OLD_BIN   # also an earlier build in every case, with ratios
#
# --baseline BIN (an absolute path, or one from the repository's root) runs
# that volley binary beside this build, with the same arguments, in the
# same alternating rounds, and adds per case its CPU per request and req/s
# and this build's ratios to them; with --with-shb it goes to vs-shb.sh too.
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing wrk=wrk nginx=nginx-light /usr/bin/time=time taskset=util-linux
if [[ " $* " == *" --with-oha "* ]] && ! command -v oha >/dev/null; then
  echo "installing oha with cargo (takes a few minutes) ..."
  cargo install oha --locked >/dev/null
fi
cargo build --release --quiet
if [[ " $* " == *" --with-shb "* ]]; then
  args=()
  for arg in "$@"; do [ "$arg" = --with-shb ] || args+=("$arg"); done
  python3 bench/vs_peers.py "${args[@]}"
  passed=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-write | --baseline=*) passed+=("$1") ;;
      --baseline) passed+=("$1" "${2:-}"); shift ;;
    esac
    shift
  done
  exec bench/vs-shb.sh "${passed[@]}"
fi
exec python3 bench/vs_peers.py "$@"
