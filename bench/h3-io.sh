#!/usr/bin/env bash
# volley's HTTP/3 on io_uring (what --io auto picks) against the same build
# on epoll, side by side on this machine (see h3_io.py): 50 connections x 1
# stream and 10 x 10 of small responses, and 2 x 8 of 1 MB responses, with
# volley serve --tls --http3 as the target. GNU time comes with apt. Every
# load targets 127.0.0.1 and every run is bounded in time; the whole script
# takes about 2 minutes.
#
#   bench/h3-io.sh                                  # 4 rounds, writes its table into bench/RESULTS.md
#   bench/h3-io.sh --baseline /tmp/volley-before    # also an earlier build on the ring, alternately
#   bench/h3-io.sh --rounds 1 --no-write --cases 1MBx16
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
install_missing /usr/bin/time=time taskset=util-linux
cargo build --release --quiet
exec python3 bench/h3_io.py "$@"
