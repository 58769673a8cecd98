#!/usr/bin/env bash
# The db file's size, cetcd beside Debian's etcd 3.4, for the same data.
#
#   bench/db-size.sh [WORKLOAD...]     (default: seq rand over)
#
# Each workload starts a fresh single-member server of each kind (one at a
# time, so neither loads the other's machine), loads it with etcd's
# benchmark tool (10 connections, 100 clients, 16-byte keys, 256-byte
# values), and prints Status's dbSize and the db file's size, then, with
# the server stopped, the file's pages per bucket as the real bbolt
# counts them (tests/tools/boltcheck -stats: leaf, branch and overflow
# pages, MiB, leaf and branch fill; the free pages).
#
#   seq   BENCH_KEYS (200000) puts with --sequential-keys over as many keys
#   rand  BENCH_KEYS puts at random keys of a space of BENCH_KEYS
#   over  BENCH_ROUNDS (3) rounds of BENCH_OVERWRITES (300000) puts over
#         1,000 keys, each followed by a physical compaction at the head
#
# The last line: name=cetcd/etcd ratios of the file sizes. Environment:
# CETCD_BUILD (default build/), ETCD_TOOLS (bench/etcd-tools.sh's OUT),
# BENCH_DIR (data dirs; default /var/tmp), BENCH_LOCK (as etcd-compare.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=${CETCD_BUILD:-$root/build}
tools=${ETCD_TOOLS:-$HOME/.cache/cetcd-etcd-tools}
keys=${BENCH_KEYS:-200000}
overwrites=${BENCH_OVERWRITES:-300000}
rounds=${BENCH_ROUNDS:-3}
workloads=("$@")
((${#workloads[@]})) || workloads=(seq rand over)

bench_lock db-size
[[ -x $tools/etcd-benchmark ]] || bash "$root/bench/etcd-tools.sh" "$tools" >&2
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cetcd-db-size.XXXXXX")
pid=""
cleanup() {
  [[ -z $pid ]] || stop_pid "$pid"
  rm -rf "$work"
}
trap cleanup EXIT
build_go "$work/boltcheck" "$root/tests/tools/boltcheck"

ctl() { ETCDCTL_API=3 etcdctl --endpoints "$ep" --command-timeout 600s "$@"; }
status_field() { ctl endpoint status -w json | python3 -c "import json, sys; print(json.load(sys.stdin)[0]$1)"; }
bench() {
  "$tools/etcd-benchmark" --endpoints "$ep" --conns 10 --clients 100 \
    put --key-size 16 --val-size 256 "$@" >/dev/null 2>&1
}

# run KIND WORKLOAD: one server, loaded; prints its lines; sets size.
run() {
  local kind=$1 w=$2 cp pp dir
  cp=$(free_port) pp=$(free_port) dir=$work/$kind-$w
  local args
  args=$(member_args "$dir" "$cp" "$pp")
  if [[ $kind == etcd ]]; then
    setsid etcd $args >"$work/$kind.log" 2>&1 &
  else
    setsid "$build/bin/cetcd" $args >"$work/$kind.log" 2>&1 &
  fi
  pid=$! ep=127.0.0.1:$cp
  wait_ready "$ep" 300 || { echo "db-size: $kind did not start" >&2; tail -n 20 "$work/$kind.log" >&2; exit 1; }
  local db=$dir/member/snap/db
  case $w in
  seq) bench --sequential-keys --key-space-size "$keys" --total "$keys" ;;
  rand) bench --key-space-size "$keys" --total "$keys" ;;
  over)
    for ((r = 1; r <= rounds; r++)); do
      bench --key-space-size 1000 --total "$overwrites"
      ctl compact --physical "$(status_field '["Status"]["header"]["revision"]')" >/dev/null
      echo "$kind $w round $r: dbSize $(status_field '["Status"]["dbSize"]') file $(stat -c %s "$db")"
    done ;;
  esac
  echo "$kind $w: dbSize $(status_field '["Status"]["dbSize"]') file $(stat -c %s "$db")"
  size=$(stat -c %s "$db")
  stop_pid "$pid"; pid=""
  "$work/boltcheck" -stats "$db" | awk 'NR == 1 || $2 != 0 || $3 != 0 || /^file/'
  rm -rf "$dir"
}

ratios=""
for w in "${workloads[@]}"; do
  case $w in seq | rand | over) ;; *) echo "db-size: unknown workload $w" >&2; exit 2 ;; esac
  run cetcd "$w"; c=$size
  run etcd "$w"; e=$size
  ratios+="${ratios:+ }$w=$(awk -v a="$c" -v b="$e" 'BEGIN { printf "%.2f", a / b }')"
done
echo "file cetcd/etcd: $ratios (load average $(cut -d' ' -f1-3 /proc/loadavg))"
