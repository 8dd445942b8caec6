#!/usr/bin/env bash
# The size of a 10-minute report at 1 s intervals (the target: under 2 MB with
# every series row carrying its interval's histogram). Loads the embedded
# target on loopback at a fixed rate for --secs (600 by default) and prints
# the report's size and its rows' histogram sizes.
#
#   bench/report-size.sh [--secs N] [--rate N]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=600 rate=5000
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "usage: bench/report-size.sh [--secs N] [--rate N]" >&2; exit 2 ;;
  esac
done
cargo build --release --quiet
volley=target/release/volley
dir=$(mktemp -d)
"$volley" serve --addr 127.0.0.1:0 > "$dir/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do grep -q listening "$dir/serve.log" && break; sleep 0.1; done
addr=$(grep -oE '127\.0\.0\.1:[0-9]+' "$dir/serve.log" | head -1)
"$volley" run "http://$addr/hi" -R "$rate" -c 20 -t 1 -d "${secs}s" -q -o "$dir/report.json" > /dev/null
python3 - "$dir/report.json" <<'PY'
import json, os, sys
path = sys.argv[1]
run = json.load(open(path))["runs"][0]
sizes = [len(r["histogram"]) for r in run["series"]]
print(f"report: {os.path.getsize(path):,} bytes, {len(sizes)} rows, {run['summary']['requests']:,} requests")
print(f"row histograms: mean {sum(sizes) / len(sizes):,.0f} bytes, largest {max(sizes):,}, all {sum(sizes):,}")
PY
