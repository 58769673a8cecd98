#!/usr/bin/env bash
# How cetcd and Debian's etcd 3.4 grow: a benchmark of one member each
# over many keys, side by side on loopback (not a test: it asserts
# nothing, it reports).
#
#   bench/scale.sh
#   SCALE_KEYS=5000000 bench/scale.sh
#
# Starts a cetcd and an etcd (one member each, data dirs in a fresh
# directory under BENCH_DIR, both running at once) and takes both through
# the same phases, one phase on each server in turn:
#   load: etcd's benchmark tool puts SCALE_KEYS distinct keys (8-byte
#     sequential keys, 256-byte values, 100 conns, 1000 clients); the put
#     rate in each quarter of the load, from the server's revision sampled
#     every 0.2 s (the first quarter's rate is the time from the first put
#     to the revision a quarter on, and so on), and the whole load's; and
#     in each quarter the CPU time of the server's processes per put, and
#     the benchmark client's in the first and last (the machine's 2
#     cores are busy throughout: a rate that falls while the server's CPU
#     per put stays flat was taken by something else);
#   count: etcdctl get of the full key range with --limit 1, serializable
#     (the server counts every key in the range for the answer's count;
#     etcdctl 3.4 has no --count-only; the median of 3 runs, etcdctl's own
#     start is in the time);
#   range100k: etcdctl get of the first 100,000 keys (--limit 100000,
#     serializable, written as protobuf to /dev/null; median of 3);
#   overwrite: SCALE_OVERWRITES puts (1000000) on SCALE_OVERWRITE_KEYS
#     keys (1000) of those loaded, with the rate per quarter;
#   compact: etcdctl compact --physical to the current revision: the time
#     until it answered and the db's size in use then stopped moving (a
#     server that times the answer out goes on deleting), and the answer;
#   regrow: the same overwrites again on the compacted db (a compacted db
#     reuses its free pages: the file should not grow);
#   restart: SIGTERM, start again on the same data dir, and the time until
#     a put is acknowledged.
# After load, overwrite, compact and regrow: the db file's size and the
# size in use (Status's dbSize and dbSizeInUse), the WAL directory's bytes
# and segments. For every phase: the peak resident memory of the server's
# processes, two ways: the sum of their VmHWM (reset at the phase's start
# through /proc/PID/clear_refs, so root; a page of shared memory counts
# once in each process that maps it) and the peak of the sum of their
# proportional set size (PSS, /proc/PID/smaps_rollup, where a page shared
# by N processes counts 1/N in each; sampled every 0.2 s, so a phase
# shorter than that may show none).
# Prints a table (cetcd, etcd, cetcd / etcd: the first server over the
# last) and the load average at the start and end; the raw samples stay in the work dir with BENCH_KEEP=1.
#
# Environment: CETCD_BUILD (default build/), SCALE_KEYS (1000000),
# SCALE_OVERWRITES (1000000), SCALE_OVERWRITE_KEYS (1000), SCALE_QUOTA
# (--quota-backend-bytes of both, 8 GiB: etcd's default 2 GiB would raise
# NOSPACE at 5,000,000 keys), BENCH_DIR (where data dirs go; /var/tmp),
# ETCD_TOOLS (where bench/etcd-tools.sh keeps the benchmark tool),
# BENCH_SERVERS ("cetcd etcd"; every name but etcd is a cetcd, with
# BENCH_FLAGS_<name> and BENCH_BUILD_<name> as in bench/etcd-compare.sh),
# BENCH_FLAGS_etcd, SCALE_LOAD_ONLY (1: the load phase and its sizes
# only, e.g. for an A/B run BENCH_SERVERS="cetcd old" with
# BENCH_BUILD_old=<a build of main>), BENCH_LOCK (the lock
# bench/etcd-compare.sh takes too; default /tmp/cetcd-bench.lock),
# BENCH_KEEP (1: keep the work dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=${CETCD_BUILD:-$root/build}
keys=${SCALE_KEYS:-1000000}
over=${SCALE_OVERWRITES:-1000000}
over_keys=${SCALE_OVERWRITE_KEYS:-1000}
quota=${SCALE_QUOTA:-8589934592}
servers=(${BENCH_SERVERS:-cetcd etcd})
tools=${ETCD_TOOLS:-$HOME/.cache/cetcd-etcd-tools}
basedir=${BENCH_DIR:-/var/tmp}
((keys >= 100000)) || { echo "scale: SCALE_KEYS is at least 100000" >&2; exit 2; }
((over_keys <= keys)) || { echo "scale: SCALE_OVERWRITE_KEYS is at most SCALE_KEYS" >&2; exit 2; }

bash "$root/bench/etcd-tools.sh" "$tools" >&2
bench=$tools/etcd-benchmark
[[ -x $build/bin/cetcd ]] || { echo "scale: build cetcd first (tools/build.sh)" >&2; exit 1; }

bench_lock scale

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
work=$(mktemp -d "$basedir/cetcd-scale.XXXXXX")
declare -A pid=() ep=() peer=() fig=()
stop() {
  [[ -z ${pid[$1]:-} ]] || stop_pid "${pid[$1]}" 100
  pid[$1]=""
}
sampler_pid=""
cleanup() {
  local s
  [[ -z $sampler_pid ]] || kill "$sampler_pid" 2>/dev/null || true
  for s in "${servers[@]}"; do stop "$s"; done
  [[ ${BENCH_KEEP:-} == 1 ]] && echo "scale: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

ctl() { ETCDCTL_API=3 etcdctl --endpoints "${ep[$1]}" "${@:2}"; }
now() { date +%s.%N; }

# start S: S's server on its data dir (the ports chosen on the first start).
start() {
  local s=$1 t0 args
  [[ -n ${ep[$s]:-} ]] || { ep[$s]=127.0.0.1:$(free_port); peer[$s]=127.0.0.1:$(free_port); }
  args="$(member_args "$work/$s.data" "${ep[$s]#*:}" "${peer[$s]#*:}") --quota-backend-bytes $quota"
  t0=$(now)
  if [[ $s == etcd ]]; then
    setsid etcd $args ${BENCH_FLAGS_etcd:-} >>"$work/$s.log" 2>&1 8>&- &
  else
    local flags="BENCH_FLAGS_$s" other="BENCH_BUILD_$s"
    setsid "${!other:-$build}/bin/cetcd" $args ${!flags:-} >>"$work/$s.log" 2>&1 8>&- &
  fi
  pid[$s]=$!
  if wait_ready "${ep[$s]}" 1200; then
    fig[$s.restart_s]=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
    return 0
  fi
  echo "scale: $s did not start; its log:" >&2; tail -n 20 "$work/$s.log" >&2
  return 1
}

procs() { pgrep -g "${pid[$1]}" || true; }
reset_hwm() { local p; for p in $(procs "$1"); do echo 5 >"/proc/$p/clear_refs" 2>/dev/null || true; done; }
# hwm_mb S: the sum of VmHWM of S's processes, MiB.
hwm_mb() {
  local p sum=0 kb
  for p in $(procs "$1"); do
    kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
    sum=$((sum + ${kb:-0}))
  done
  echo $((sum / 1024))
}

# sampler S OUT: every 0.2 s a line "seconds revision pss_kb cpu client"
# of S (the revision from a serializable Range through the JSON gateway,
# PSS summed over S's processes, their CPU time in clock ticks, and the
# CPU ticks of the benchmark client whose pid is in $work/client.pid, 0
# without one), until killed.
sampler() {
  rm -f "$2" "$work/client.pid"
  python3 - "${ep[$1]}" "${pid[$1]}" "$work/client.pid" >"$2" 8>&- <<'EOF' &
import json, os, sys, time, urllib.request
ep, pgid, client_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = json.dumps({"key": "AA==", "serializable": True}).encode()
def ticks(d):
    with open("/proc/%s/stat" % d) as f:
        st = f.read()
    v = st[st.rindex(")") + 2:].split()
    return int(v[11]) + int(v[12])
def usage():
    kb = cpu = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.getpgid(int(d)) != pgid:
                continue
            cpu += ticks(d)
            with open("/proc/%s/smaps_rollup" % d) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        kb += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return kb, cpu
def client():
    try:
        with open(client_file) as f:
            return ticks(f.read().strip())
    except (OSError, ValueError):
        return 0
while True:
    t = time.time()
    try:
        r = urllib.request.urlopen("http://%s/v3/kv/range" % ep, body, timeout=2)
        rev = int(json.load(r)["header"]["revision"])
    except Exception:
        rev = -1
    kb, cpu = usage()
    print("%.3f %d %d %d %d" % (t, rev, kb, cpu, client()), flush=True)
    time.sleep(max(0, 0.2 - (time.time() - t)))
EOF
  sampler_pid=$!
  # The first sample before the phase begins: it is the quarters' start.
  for _ in $(seq 100); do [[ -s $2 ]] && break; sleep 0.05; done
}

revision() { ctl "$1" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'; }

# phase_begin S / phase_end S NAME: around one phase of S, the sampler and
# the peak memory (NAME.hwm_mb, NAME.pss_mb).
phase_begin() { reset_hwm "$1"; sampler "$1" "$work/$1.samples"; }
phase_end() {
  local s=$1 name=$2
  fig[$s.$name.hwm_mb]=$(hwm_mb "$s")
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true
  sampler_pid=""
  fig[$s.$name.pss_mb]=$(awk '$3 > m { m = $3 } END { printf "%d", m / 1024 }' "$work/$s.samples")
  cp "$work/$s.samples" "$work/$s.$name.samples"
}

# puts S NAME TOTAL SPACE: the benchmark tool's sequential puts through S;
# NAME.qps (the tool's), NAME.q1..q4 (rate per quarter from the samples),
# NAME.cpu_q1..q4 (the CPU time of S's processes per put in each quarter,
# microseconds) and NAME.client_q1, NAME.client_q4 (the benchmark
# client's): with the machine's 2 cores busy, a rate that falls while
# the server's CPU per put stays flat is not the server's.
puts() {
  local s=$1 name=$2 total=$3 space=$4 rev0 out
  rev0=$(revision "$s")
  phase_begin "$s"
  "$bench" --endpoints "${ep[$s]}" --conns 100 --clients 1000 put --total "$total" \
    --key-space-size "$space" --sequential-keys --key-size 8 --val-size 256 >"$work/bench.out" 2>&1 &
  echo $! >"$work/client.pid"
  wait $! || true
  out=$(tr -d '\r' <"$work/bench.out")
  sleep 0.5
  phase_end "$s" "$name"
  fig[$s.$name.qps]=$(awk '/Requests\/sec:/ { printf "%d", $2 }' <<<"$out")
  grep -q "Error distribution" <<<"$out" && { echo "scale: $s $name had errors:" >&2; grep -A5 "Error distribution" <<<"$out" >&2; }
  local q
  q=($(awk -v r0="$rev0" -v n="$total" -v hz="$(getconf CLK_TCK)" '
    BEGIN { c = 0 }
    # (the client gone, its last ticks stand)
    $2 >= 0 { t[c] = $1; r[c] = $2; cpu[c] = $4; cl[c] = ($5 > 0 || c == 0) ? $5 : cl[c - 1]; c++ }
    # the sample at which the revision first reached x (-1: none)
    function at(x,   i) {
      for (i = 1; i < c; i++)
        if (r[i - 1] < x && r[i] >= x)
          return i
      return -1
    }
    function cross(x,   i) {
      i = at(x)
      return i < 0 ? -1 : t[i - 1] + (t[i] - t[i - 1]) * (x - r[i - 1]) / (r[i] - r[i - 1])
    }
    # CPU microseconds a put from the sample i to j of the ticks in v
    function per_put(v, i, j) {
      return (i >= 0 && j > i && r[j] > r[i]) ? (v[j] - v[i]) * 1e6 / hz / (r[j] - r[i]) : 0
    }
    END {
      for (k = 0; k <= 4; k++) { x[k] = cross(r0 + (k == 0 ? 1 : k * n / 4)); s[k] = at(r0 + (k == 0 ? 1 : k * n / 4)) }
      for (k = 1; k <= 4; k++)
        printf "%d ", (x[k] > 0 && x[k - 1] > 0 && x[k] > x[k - 1]) ? n / 4 / (x[k] - x[k - 1]) : 0
      for (k = 1; k <= 4; k++)
        printf "%.1f ", per_put(cpu, s[k - 1], s[k])
      printf "%.1f %.1f", per_put(cl, s[0], s[1]), per_put(cl, s[3], s[4])
    }' "$work/$s.$name.samples"))
  for k in 1 2 3 4; do fig[$s.$name.q$k]=${q[k - 1]} fig[$s.$name.cpu_q$k]=${q[k + 3]}; done
  fig[$s.$name.client_q1]=${q[8]} fig[$s.$name.client_q4]=${q[9]}
}

# sizes S NAME: the db file's MiB, dbSize and dbSizeInUse (MiB), the WAL
# directory's MiB and segments.
sizes() {
  local s=$1 name=$2 d=$work/$1.data/member st
  fig[$s.$name.db_file_mb]=$(( $(stat -c %s "$d/snap/db") / 1048576 ))
  st=$(ctl "$s" endpoint status -w json)
  fig[$s.$name.db_mb]=$(python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"] // 1048576)' <<<"$st")
  fig[$s.$name.db_inuse_mb]=$(python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["Status"]; print(s.get("dbSizeInUse", 0) // 1048576)' <<<"$st")
  fig[$s.$name.wal_mb]=$(( $(du -sb "$d/wal" | cut -f1) / 1048576 ))
  fig[$s.$name.wal_segments]=$(find "$d/wal" -name '*.wal' | wc -l)
}

# timed_get S NAME ARGS...: the median of 3 runs of etcdctl get ARGS, s.
timed_get() {
  local s=$1 name=$2 t ts=()
  shift 2
  phase_begin "$s"
  for _ in 1 2 3; do
    t=$(now)
    ctl "$s" --command-timeout 120s get --consistency=s -w protobuf "$@" >/dev/null
    ts+=($(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'))
  done
  phase_end "$s" "$name"
  fig[$s.$name.s]=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p)
}

for s in "${servers[@]}"; do start "$s"; done
# restart_s is the restart's (a first start on an empty dir is not it)
for s in "${servers[@]}"; do unset "fig[$s.restart_s]"; done
echo "scale: $keys keys; load average $load_start" >&2
for s in "${servers[@]}"; do
  echo "scale: $s: load" >&2; puts "$s" load "$keys" "$keys"; sizes "$s" load
done
if [[ ${SCALE_LOAD_ONLY:-} != 1 ]]; then
for s in "${servers[@]}"; do timed_get "$s" count "" --from-key --limit 1; done
for s in "${servers[@]}"; do timed_get "$s" range100k "" --from-key --limit 100000; done
for s in "${servers[@]}"; do
  echo "scale: $s: overwrite" >&2; puts "$s" overwrite "$over" "$over_keys"; sizes "$s" overwrite
done
# in_use S: Status's dbSizeInUse of S.
in_use() { ctl "$1" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"].get("dbSizeInUse", 0))'; }
# compact S: compact --physical to S's current revision; compact.s is the
# time until the call returned and dbSizeInUse has then not moved for 2 s
# (less those 2 s): a server may answer before the deletion is done, or
# give up waiting (compact.answer: ok, or the error's first words).
compact() {
  local s=$1 t t_end u v same=0
  phase_begin "$s"; t=$(now)
  if ctl "$s" --command-timeout 600s compact --physical "$(revision "$s")" >/dev/null 2>"$work/$s.compact.err"; then
    fig[$s.compact.answer]=ok
  else
    fig[$s.compact.answer]=$(grep -o 'Error: .*' "$work/$s.compact.err" | head -n1 | tr ' ' _ | cut -c1-40)
    echo "scale: $s: compact: $(cat "$work/$s.compact.err")" >&2
  fi
  t_end=$(now) u=$(in_use "$s")
  while ((same < 4)); do
    sleep 0.5; v=$(in_use "$s")
    if [[ $v == "$u" ]]; then same=$((same + 1)); else same=0 t_end=$(now) u=$v; fi
  done
  fig[$s.compact.s]=$(awk -v a="$t" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
  phase_end "$s" compact
}
for s in "${servers[@]}"; do compact "$s"; sizes "$s" compact; done
for s in "${servers[@]}"; do
  echo "scale: $s: regrow" >&2; puts "$s" regrow "$over" "$over_keys"; sizes "$s" regrow
done
for s in "${servers[@]}"; do
  stop "$s"; start "$s"
  fig[$s.restart.hwm_mb]=$(hwm_mb "$s")
done
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# The table: one row a figure, a column a server, then the first server's
# figure over the last's (cetcd / etcd; cetcd / old in an A/B run).
rows=()
for p in load overwrite regrow; do
  rows+=($p.qps $p.q1 $p.q2 $p.q3 $p.q4 $p.cpu_q1 $p.cpu_q2 $p.cpu_q3 $p.cpu_q4 $p.client_q1
         $p.client_q4 $p.hwm_mb $p.pss_mb)
done
for p in load overwrite compact regrow; do
  rows+=($p.db_file_mb $p.db_mb $p.db_inuse_mb $p.wal_mb $p.wal_segments)
done
rows+=(compact.answer compact.s count.s count.hwm_mb count.pss_mb range100k.s range100k.hwm_mb range100k.pss_mb restart_s restart.hwm_mb)
first=${servers[0]} last=${servers[-1]}
printf '%-24s' figure; printf ' %12s' "${servers[@]}"; printf ' %12s\n' "$first/$last"
for r in "${rows[@]}"; do
  printf '%-24s' "$r"
  for s in "${servers[@]}"; do printf ' %12s' "${fig[$s.$r]:--}"; done
  awk -v a="${fig[$first.$r]:-}" -v b="${fig[$last.$r]:-}" 'BEGIN { if (a != "" && b + 0 > 0) printf " %12.2f\n", a / b; else printf " %12s\n", "-" }'
done
for s in "${servers[@]}"; do
  awk -v s="$s" -v a="${fig[$s.load.q1]}" -v b="${fig[$s.load.q4]}" \
    'BEGIN { if (a > 0) printf "%s: load rate, last quarter / first: %.2f\n", s, b / a }'
done
echo "keys $keys overwrites $over on $over_keys keys; load average at start $load_start, at end $load_end"
