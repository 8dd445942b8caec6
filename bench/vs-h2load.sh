#!/usr/bin/env bash
# volley against h2load over HTTP/2 and against wrk over HTTP/1.1 with TLS,
# side by side on this machine (see vs_h2load.py). Installs what it
# needs when missing: Debian's nghttp2-client (h2load), nginx-light, wrk,
# openssl (for a self-signed certificate) and GNU time (for each process's
# own CPU and peak RSS). Every load targets 127.0.0.1 only and every run is
# bounded in time; the whole script takes about 1.5 minutes.
#
#   bench/vs-h2load.sh                         # 3 rounds of 5 s, writes bench/RESULTS.md
#   bench/vs-h2load.sh --rounds 1 --duration 3 # shorter
#   bench/vs-h2load.sh --only-peers            # h2load and wrk only: no build, no volley
#   bench/vs-h2load.sh --no-write              # print only
#   bench/vs-h2load.sh --no-write --baseline OLD_BIN   # also an earlier build in every case, with ratios
#
# --baseline BIN (an absolute path, or one from the repository's root) runs
# that volley binary beside this build, with the same arguments, in the
# same alternating rounds, and adds per case its CPU per request and req/s
# and this build's ratios to them (not with --only-peers).
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
install_missing h2load=nghttp2-client nginx=nginx-light wrk=wrk openssl=openssl /usr/bin/time=time taskset=util-linux
for module in http_ssl_module http_v2_module; do
  if ! nginx -V 2>&1 | grep -q -- "--with-$module"; then
    echo "this nginx was built without $module (nginx -V); HTTP/2 over TLS needs it" >&2
    exit 1
  fi
done
if [[ " $* " != *" --only-peers "* ]]; then
  cargo build --release --quiet
fi
exec python3 bench/vs_h2load.py "$@"
