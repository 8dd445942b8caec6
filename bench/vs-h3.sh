#!/usr/bin/env bash
# volley's HTTP/3 against oha's (built with its http3 feature) and shb's
# (io_uring, by oha's author), and against volley's own HTTP/2 over TLS,
# side by side on this machine (see vs_h3.py): 50 connections x 1 stream
# and 10 x 10, with volley serve --tls --http3 as the target. oha and shb
# are installed with cargo into caches under target/ when missing (oha's
# first build takes several minutes), GNU time with apt. Every load targets
# 127.0.0.1 and every run is bounded in time; the whole script takes about
# 4 minutes.
#
#   bench/vs-h3.sh                   # 3 rounds, writes its table into bench/RESULTS.md
#   bench/vs-h3.sh --rounds 1 --no-write --cases 50x1
#   bench/vs-h3.sh --no-write --baseline OLD_BIN   # also an earlier build's h3 in every case, with ratios
#
# --baseline BIN (an absolute path, or one from the repository's root) runs
# that volley binary's h3 beside this build's, with the same arguments, in
# the same alternating rounds and against the same target (this build's
# volley serve), and adds per case its CPU per request and req/s and this
# build's ratios to them.
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing /usr/bin/time=time taskset=util-linux
use_shb
use_oha_h3
cargo build --release --quiet
exec python3 bench/vs_h3.py "$@"
