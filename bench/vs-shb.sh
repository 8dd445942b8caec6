#!/usr/bin/env bash
# volley on io_uring and on epoll against shb (io_uring, by oha's author)
# and wrk, side by side on this machine (see vs_shb.py): HTTP/1.1 at 50 and
# 4,000 connections, h2c at 10 x 10 and 50 x 1, and HTTP/1.1 with a new
# connection for each request (`--cases fresh50`), nginx as the target. shb is
# installed with cargo into target/peers (a cache) when missing, Debian's
# wrk, nginx-light and GNU time with apt. Every load targets 127.0.0.1 and
# every run is bounded in time; the whole script takes about 8 minutes.
#
#   bench/vs-shb.sh                  # 3 rounds, writes its table into bench/RESULTS.md
#   bench/vs-shb.sh --rounds 1 --no-write --cases c50
#   bench/vs-shb.sh --no-write --cases c4000 --baseline OLD_BIN \
#       --only "volley io_uring,baseline io_uring,shb unbatched"   # a build against an earlier one
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing wrk=wrk nginx=nginx-light /usr/bin/time=time taskset=util-linux
use_shb
cargo build --release --quiet
exec python3 bench/vs_shb.py "$@"
