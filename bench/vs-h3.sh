#!/usr/bin/env bash
# volley's HTTP/3 against shb's (io_uring, by oha's author) and against
# volley's own HTTP/2 over TLS, side by side on this machine (see vs_h3.py):
# 50 connections x 1 stream and 10 x 10, with volley serve --tls --http3 as
# the target. shb is installed with cargo into target/peers (a cache) when
# missing, GNU time with apt. Every load targets 127.0.0.1 and every run is
# bounded in time; the whole script takes about 3 minutes.
#
#   bench/vs-h3.sh                   # 3 rounds, writes its table into bench/RESULTS.md
#   bench/vs-h3.sh --rounds 1 --no-write --cases 50x1
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing /usr/bin/time=time taskset=util-linux
use_shb
cargo build --release --quiet
exec python3 bench/vs_h3.py "$@"
