#!/usr/bin/env bash
# volley on a many-core machine (16 cores by default: nginx with 10 workers
# on cores 6-15, each generator 6 threads on cores 0-5): req/s against shb,
# wrk and h2load, and the open model's own lag at 100k, 300k and 500k req/s
# (see many_core.py). Installs Debian's nginx-light, wrk, nghttp2-client and
# GNU time when missing, and shb with cargo. Every load targets 127.0.0.1 and
# every run is bounded in time; the default takes about four minutes.
#
#   bench/many-core.sh
#   bench/many-core.sh --parts lag --rates 100000 --rounds-lag 3
#   bench/many-core.sh --parts peers --before /tmp/volley-old
#   bench/many-core.sh --gen-cores 0-7 --server-cores 8-31 --threads 8 --nginx-workers 24
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing nginx=nginx-light wrk=wrk h2load=nghttp2-client /usr/bin/time=time taskset=util-linux
use_shb
cargo build --release --quiet
# 4,000 connections for each generator and as many for nginx.
ulimit -n 65536 2>/dev/null || true
exec python3 bench/many_core.py "$@"
