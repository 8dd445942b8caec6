# What the benchmark scripts share, sourced by each: installing the Debian
# packages of the tools a benchmark needs when this machine lacks them.

# install_missing TOOL=PACKAGE ...: TOOL is a command looked up on PATH, or
# an absolute path that must be executable; the packages of the missing
# ones are installed with apt in one go.
install_missing() {
  local need=() spec tool
  for spec in "$@"; do
    tool="${spec%%=*}"
    if [[ "$tool" == /* ]]; then
      [ -x "$tool" ] || need+=("${spec#*=}")
    else
      command -v "$tool" >/dev/null || need+=("${spec#*=}")
    fi
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]} ..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}

# use_shb: shb (io_uring, by oha's author), installed with cargo into
# target/peers (a cache) when missing; exports SHB (its path) and
# SHB_VERSION for the Python side.
use_shb() {
  local peers="$PWD/target/peers"
  if [ ! -x "$peers/bin/shb" ]; then
    echo "installing shb with cargo into $peers (takes a few minutes) ..."
    cargo install shb --locked --root "$peers" >/dev/null
  fi
  SHB="$peers/bin/shb"
  SHB_VERSION="$(cargo install --list --root "$peers" | sed -n 's/^shb \(v[^:]*\):$/shb \1/p')"
  export SHB SHB_VERSION
}
