#!/usr/bin/env bash
# drill's own example files, run unchanged by drill and by `volley plan`
# against drill's example server (node, bound to 127.0.0.1:9000): prints a
# table of total and per-item request counts, which must be equal. Each run
# is bounded by the examples' iterations and a 180 s timeout; loopback only.
#
#   git clone https://github.com/fcsonline/drill /tmp/drill
#   (cd /tmp/drill && cargo build --release)      # a few minutes
#   bench/drill-examples.sh --drill-repo /tmp/drill [--drill /path/to/drill]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
# jq: drill's benchmark.yml pipes an exec through it.
install_missing node=nodejs npm=npm jq=jq
cargo build --release --quiet
exec python3 bench/drill_examples.py "$@"
