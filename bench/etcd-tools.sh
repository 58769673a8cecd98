#!/usr/bin/env bash
# Builds etcd 3.4's benchmark tool from Debian's etcd source package and
# installs Debian's etcd server and etcdctl, for side-by-side runs against
# cetcd. Everything comes from Debian's archive (the source package and the
# Go build dependencies the package itself declares).
#
#   bench/etcd-tools.sh [OUT]     (default OUT: $HOME/.cache/cetcd-etcd-tools)
#
# Leaves OUT/etcd-benchmark, OUT/watch-floor built from bench/watch-floor,
# OUT/bigrange from tests/tools/bigrange and OUT/latprobe from
# tests/tools/latprobe (over Debian's etcd and gRPC Go packages). Needs
# root.
# Reuses a previous build.
# Installing etcd-server on a host that runs systemd would start its
# service on 2379/2380; a policy-rc.d keeps it from starting.
set -euo pipefail
out=${1:-$HOME/.cache/cetcd-etcd-tools}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"

build_tools() {
  build_go "$out/watch-floor" "$root/bench/watch-floor/main.go"
  build_go "$out/bigrange" "$root/tests/tools/bigrange"
  build_go "$out/latprobe" "$root/tests/tools/latprobe"
}
if [[ -x $out/etcd-benchmark && -x /usr/bin/etcd ]]; then
  build_tools
  echo "etcd-tools: using $out/etcd-benchmark"; exit 0
fi
export DEBIAN_FRONTEND=noninteractive

# Keep package scripts from starting etcd's service while we install it.
policy=/usr/sbin/policy-rc.d
restore_policy=
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"
  restore_policy=1
fi
cleanup() { [[ -n $restore_policy ]] && rm -f "$policy"; rm -rf "${tmp:-}"; }
trap cleanup EXIT
apt-get install -y -qq etcd-server etcd-client golang-go >/dev/null
if command -v systemctl >/dev/null && systemctl is-active -q etcd 2>/dev/null; then
  systemctl disable --now etcd >/dev/null 2>&1 || true
fi

# A private apt state with source entries for the machine's own archives.
tmp=$(mktemp -d)
mkdir -p "$tmp/lists/partial" "$tmp/parts"
shopt -s nullglob
for f in /etc/apt/sources.list.d/*.sources; do
  sed -e 's/^Types:.*/Types: deb deb-src/' "$f" > "$tmp/parts/$(basename "$f")"
done
if [[ -s /etc/apt/sources.list ]]; then
  awk '$1=="deb"{print; $1="deb-src"; print}' /etc/apt/sources.list > "$tmp/parts/sources.list"
fi
apt=(apt-get -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts"
     -o "Dir::State::Lists=$tmp/lists")
"${apt[@]}" update -qq
"${apt[@]}" build-dep -y -qq etcd >/dev/null
(cd "$tmp" && "${apt[@]}" source --download-only -qq etcd >/dev/null)
tar -C "$tmp" -xzf "$tmp"/etcd_*.orig.tar.gz
src=$(find "$tmp" -maxdepth 1 -type d -name 'etcd-*' | head -n1)

# Build tools/benchmark in a GOPATH of its own over Debian's Go libraries.
gopath=$tmp/gopath
mkdir -p "$gopath/src/go.etcd.io/etcd"
cp -r "$src/tools" "$gopath/src/go.etcd.io/etcd/"
GO111MODULE=off GOFLAGS= GOPATH="$gopath:/usr/share/gocode" GOCACHE="$tmp/gocache" \
  go build -o "$out/etcd-benchmark" go.etcd.io/etcd/tools/benchmark
build_tools
echo "etcd-tools: built $out/etcd-benchmark; etcd $(etcd --version | head -n1)"
