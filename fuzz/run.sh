#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 30) with
# libFuzzer (cargo-fuzz, nightly toolchain), starting from the committed
# seeds in fuzz/seeds/TARGET plus whatever fuzz/corpus/TARGET gathered
# before. Any crash, timeout (one input over 10 s) or memory blow-up (over
# 2 GiB) stops the script with a non-zero exit; the input is left in
# fuzz/artifacts/TARGET/ and belongs in fuzz/regressions/TARGET/ once fixed
# (tests/integration/fuzz_inputs.rs replays those on every `cargo test`).
#
# The targets build without a sanitizer unless FUZZ_SANITIZER names one
# (`address` adds AddressSanitizer and its leak checks). volley's code
# that they reach is safe Rust but for one SIMD load from a 16-byte array,
# and without the sanitizer they build in 404 s instead of 572 s on 2
# cores, run 2.3 to 6 times as many inputs a second, and the memory limit
# applies to the target's own memory (a peak of 28-59 MB in 10 s runs,
# against 345-429 MB with the sanitizer's shadow memory). A change to
# unsafe code, or to a dependency's, deserves a longer run with the
# sanitizer: FUZZ_SANITIZER=address fuzz/run.sh 600.
#
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
#        fuzz/run.sh --build-only   (builds every target, runs none)
set -euo pipefail
cd "$(dirname "$0")"
build_only=false
if [ "${1:-}" = --build-only ]; then
  build_only=true
  shift
fi
seconds="${1:-30}"
shift || true
sanitizer="${FUZZ_SANITIZER:-none}"

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "installing the nightly toolchain for cargo-fuzz ..."
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz ..."
  # --debug: the tool only drives cargo, so it need not be optimised, and
  # builds in 36 s instead of 58 s on a 2-core machine.
  cargo install cargo-fuzz --locked --debug
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

began=$(date +%s)
cargo +nightly fuzz build -O -s "$sanitizer"
echo "fuzz build: $(( $(date +%s) - began )) s"
if $build_only; then
  exit 0
fi
# One target's run; its log in corpus/TARGET.log, its status returned.
fuzz_one() {
  local target="$1"
  mkdir -p "corpus/$target" "seeds/$target"
  # A temporary folder of the run's own (the plan target writes its inputs
  # as files), removed after it: libFuzzer exits without running the
  # destructors that would remove the target's.
  local scratch
  scratch="$(mktemp -d)"
  # Leaks are looked for only under AddressSanitizer, which brings the
  # leak checker. The HTTP/2 target registers a loopback socket with
  # tokio's reactor per input, whose slab outlives the input: the leak
  # checker would run after nearly every input (70 inputs/s instead of
  # 1800). Memory blow-ups are still caught by -rss_limit_mb.
  local leaks=0
  [ "$sanitizer" = address ] && [ "$target" != http2_connection ] && leaks=1
  local status=0
  TMPDIR="$scratch" cargo +nightly fuzz run -O -s "$sanitizer" "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -detect_leaks="$leaks" \
    -print_final_stats=1 2>"corpus/$target.log" || status=$?
  rm -rf "$scratch"
  return "$status"
}

# Each libFuzzer run uses one core: as many run at once as there are cores
# (each still gets its SECONDS of a core to itself).
parallel="$(nproc)"
for ((first = 0; first < ${#targets[@]}; first += parallel)); do
  batch=("${targets[@]:first:parallel}")
  pids=()
  for target in "${batch[@]}"; do
    echo "fuzzing $target for ${seconds} s ..."
    fuzz_one "$target" &
    pids+=("$!")
  done
  for i in "${!batch[@]}"; do
    target="${batch[$i]}"
    if ! wait "${pids[$i]}"; then
      wait || true
      tail -n 40 "corpus/$target.log"
      echo "fuzz target $target failed: its input is in fuzz/artifacts/$target/;" \
        "fix the cause and add the input to fuzz/regressions/$target/" >&2
      exit 1
    fi
    echo -n "$target: "
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "corpus/$target.log" | tr '\n' ' '
    echo
  done
done
echo "fuzzing done: ${#targets[@]} targets, $(( $(date +%s) - began )) s in all"
