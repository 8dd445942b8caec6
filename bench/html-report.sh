#!/usr/bin/env bash
# The HTML report's size and draw time for a long run: a 10-minute run at
# 1 s intervals (600 series rows, target watched) must give a file under
# 1 MB that headless chromium draws in under 1 s. Load stays on loopback,
# bounded by -d; the embedded target is started and stopped by volley.
#   bench/html-report.sh            # 10 minutes
#   DURATION=30s bench/html-report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
python="${VOLLEY_BROWSER_PYTHON:-target/browser-venv/bin/python}"
[ -x "$python" ] || { echo "error: no Playwright venv: run .ci/run once, or set VOLLEY_BROWSER_PYTHON" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
volley=target/release/volley
"$volley" run --spawn "$volley serve --addr 127.0.0.1:$port" -R 300 -c 8 -d "${DURATION:-10m}" \
  --interval 1s -q --html "$dir/run.html" -o "$dir/run.json" "http://127.0.0.1:$port/sleep/1" >/dev/null
figures=$("$python" tests/browser/check_report.py "$dir/run.html" "$dir/run.json" "$dir/shot.png")
python3 - "$dir" "$figures" <<'PY'
import json, os, sys
d, figures = sys.argv[1], json.loads(sys.argv[2])
report = json.load(open(f"{d}/run.json"))
size = os.path.getsize(f"{d}/run.html")
rows = len(report["runs"][0]["series"])
print(f"{rows} intervals; JSON report {os.path.getsize(f'{d}/run.json'):,} bytes")
print(f"HTML file: {size:,} bytes = {size / 1e6:.3f} of the 1 MB limit")
print(f"drawn in {figures['draw_ms']:.0f} ms = {figures['draw_ms'] / 1000:.3f} of the 1 s limit "
      f"(page load to drawn, as Playwright saw it: {figures['load_s']:.2f} s)")
PY
