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

# use_oha_h3: oha built with its http3 feature (h3 and quinn), pinned to
# OHA_H3_VERSION and installed with cargo into target/peers-oha-h3 (a
# cache of its own, so that a plain `oha` elsewhere, without HTTP/3, is
# neither used nor replaced) when missing; exports OHA_H3 (its path) and
# OHA_H3_VERSION for the Python side. oha's README asks for nothing but the
# feature: no RUSTFLAGS.
OHA_H3_VERSION=1.16.0
use_oha_h3() {
  local peers="$PWD/target/peers-oha-h3"
  if ! cargo install --list --root "$peers" 2>/dev/null | grep -qx "oha v$OHA_H3_VERSION:"; then
    echo "installing oha $OHA_H3_VERSION (http3) with cargo into $peers (takes several minutes) ..."
    cargo install oha --version "$OHA_H3_VERSION" --locked --features http3 --root "$peers" >/dev/null
  fi
  OHA_H3="$peers/bin/oha"
  export OHA_H3 OHA_H3_VERSION
}
