#!/usr/bin/env bash
# Side-by-side benchmark of stored's store (build/bin/store_bench) and bbolt
# (tests/tools/boltbench, on Debian's bbolt package), the store etcd uses.
#
#   bench/store-compare.sh [--quick]
#
# Both programs take the same flags and print the same lines (see their
# headers). For each key order (seq, rand) it runs them alternately, RUNS
# times each, on files in the same directory, and prints the median of
# each figure, the db file sizes, and a last line of ratios (cetcd / bbolt)
# as name=value pairs; above 1 favours cetcd for ops_per_sec, below 1 for
# file size. get-rand is reported after each order's put phase.
#
# Environment: CETCD_BUILD (default build/), BENCH_N (keys; 1000000,
# --quick makes it 100000), BENCH_VAL (value bytes, 256), BENCH_BATCH
# (puts per commit, 10000, boltbench's default), BENCH_READERS (2),
# BENCH_GROUP (store_bench's -group: 1, one key at a time as boltbench
# reads; 16 reads keys 16 at a time, as gatewayd answers the point reads
# that arrive in one loop turn),
# BENCH_RUNS (3), BENCH_DIR (where db files go; default /var/tmp),
# BENCH_CACHE_DIR (a dir where store_bench makes its cache as a file, as
# stored's region is a file of its runtime dir: on a tmpfs mounted with
# huge=within_size the cache gets 2 MiB pages; default: anonymous shared
# memory),
# BOLTBENCH_CACHE (where boltbench is built; default
# ~/.cache/cetcd-boltbench), BENCH_LOCK (the lock that keeps benchmark
# runs apart, as etcd-compare.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=${CETCD_BUILD:-$root/build}
n=${BENCH_N:-1000000}
[[ ${1:-} == --quick ]] && n=${BENCH_N:-100000}
val=${BENCH_VAL:-256}
batch=${BENCH_BATCH:-10000}
readers=${BENCH_READERS:-2}
group=${BENCH_GROUP:-1}
runs=${BENCH_RUNS:-3}
basedir=${BENCH_DIR:-/var/tmp}
cache=${BOLTBENCH_CACHE:-$HOME/.cache/cetcd-boltbench}

store_bench=$build/bin/store_bench
[[ -x $store_bench ]] || { echo "store-compare: build store_bench first (tools/build.sh)" >&2; exit 1; }
command -v go >/dev/null || { echo "store-compare: go missing (golang-go)" >&2; exit 1; }
[[ -d /usr/share/gocode/src/go.etcd.io/bbolt ]] ||
  { echo "store-compare: bbolt missing (golang-github-coreos-bbolt-dev)" >&2; exit 1; }

boltbench=$cache/boltbench
build_go "$boltbench" "$root/tests/tools/boltbench"
bench_lock store-compare

work=$(mktemp -d "$basedir/cetcd-store-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run NAME PROG ORDER RUN: one run; appends "NAME METRIC VALUE" lines to
# $work/results (ops_per_sec of each line, then the file's size).
run() {
  local name=$1 prog=$2 order=$3 i=$4 db=$work/$1.db out
  local extra=()
  if [[ $name == cetcd ]]; then
    extra=(-group "$group")
    [[ -n ${BENCH_CACHE_DIR:-} ]] && extra+=(-cache-file "$BENCH_CACHE_DIR/cetcd-store-compare-cache.$$")
  fi
  if ! out=$("$prog" -n "$n" -val "$val" -batch "$batch" -order "$order" \
      -readers "$readers" "${extra[@]}" -keep "$db"); then
    echo "store-compare: $name failed (order $order, run $i)" >&2
    exit 1
  fi
  echo "$out" | awk -v p="  $name run $i: " '{ print p $0 }' >&2
  echo "$out" | awk -v name="$name" -v order="$order" '
    { split($4, kv, "="); m = $1; if (m == "get-rand") m = "get-rand/" order;
      print name, m, kv[2] }' >>"$work/results"
  echo "$name size/$order $(stat -c %s "$db")" >>"$work/results"
  rm -f "$db"
}

: >"$work/results"
echo "store-compare: n=$n val=$val batch=$batch readers=$readers group=$group runs=$runs dir=$basedir cache_dir=${BENCH_CACHE_DIR:-anonymous}" >&2
for order in seq rand; do
  for i in $(seq "$runs"); do
    run cetcd "$store_bench" "$order" "$i"
    run bbolt "$boltbench" "$order" "$i"
  done
done

result_median() { # NAME METRIC
  awk -v name="$1" -v m="$2" '$1 == name && $2 == m { print $3 }' "$work/results" |
    sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
      else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

metrics=(put-seq get-rand/seq put-rand get-rand/rand size/seq size/rand)
printf '%-16s %14s %14s %8s\n' "median of $runs" cetcd bbolt ratio
ratios=()
for m in "${metrics[@]}"; do
  c=$(result_median cetcd "$m"); b=$(result_median bbolt "$m")
  r=$(awk -v c="$c" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? c / b : 0) }')
  unit=ops/s; [[ $m == size/* ]] && unit=bytes
  printf '%-16s %14s %14s %8s  %s\n' "$m" "$c" "$b" "$r" "$unit"
  ratios+=("$m=$r")
done
echo "ratios(cetcd/bbolt) ${ratios[*]}"
