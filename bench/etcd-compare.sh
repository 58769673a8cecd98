#!/usr/bin/env bash
# Side-by-side benchmark of cetcd and Debian's etcd 3.4 on loopback.
#
#   bench/etcd-compare.sh [--quick] [--members 3]
#
# Starts a fresh cetcd and a fresh etcd with equivalent settings (data
# dirs on the same disk, default snapshot count and quota), single members
# or (--members 3) 3-member clusters on loopback, both running side by
# side, and runs the same workloads against each: every workload
# BENCH_ROUNDS times (default 3), alternating the two servers and which
# goes first, keeping the median of each figure. Prints a table and then
# a last line of ratios
# (cetcd / etcd) as name=value pairs. For qps a ratio above 1 favours
# cetcd; for latency and CPU per request, below 1 does.
#
# Workloads:
#   etcd's benchmark tool: put (100 conns, 1000 clients, 8-byte sequential
#   keys, 256-byte values), range --consistency l and s (same conns and
#   clients), put with 1 conn and 1 client (latency), txn-put;
#   latency: one client, one request at a time, on the leader: the
#   benchmark tool's put and linearizable range (mean, p50, p99) and
#   h2load's gRPC Put and linearizable Range with -c 1 -m 1 (mean), in us;
#   beside them each server's own mean WAL sync during each put run
#   (etcd_disk_wal_fsync_duration_seconds: etcd's fdatasync, cetcd's
#   batch from its submission to its reaping); the last line gives
#   cetcd's h2load put mean less the fdatasync floor, and cetcd's to
#   etcd's of each put mean less that server's own mean sync
#   (lat_put_over_sync_ratio, lat_h2_put_over_sync_ratio): the time
#   spent besides the disk's, which both pay;
#   h2load sending raw gRPC (100 connections x 10 streams): serializable
#   Range, linearizable Range, Put; for each the server's CPU time per
#   request (user + sys of all its processes, from /proc);
#   the JSON gateway: h2load over HTTP/1.1 (100 connections, one request
#   at a time each) posting to /v3/kv/range (serializable, key "foo") and
#   /v3/kv/put (key "foo", 256-byte value), with the servers' CPU time per
#   request and the share answered 2xx, and for puts the requests per WAL
#   sync and a sync's mean time, from the server's
#   etcd_disk_wal_fsync_duration_seconds (json_run);
#   etcd's benchmark tool on Watch and Lease: watch (10 conns and clients,
#   100 streams x 100 watchers on 10 keys, 1000 watchers a key, puts as
#   fast as they go; the figure is watch events received per second,
#   which on 2 cores the tool's own client bounds, and the servers' CPU
#   time per event), watch-latency (100 watchers
#   on one key over 10 conns, 200 puts a second; p99 from put
#   acknowledged to each watcher's event),
#   watch_wire: the same watch-latency run under tcpdump on loopback
#   (bench/watch-wire.py): from each put request's segment to the segment
#   with its last watch event (p50, p99), and from the put's answer to
#   that segment (p99; negative when every event left first), times the
#   client's own scheduling does not move (skipped without tcpdump);
#   watch_floor: the same watch-latency run against bench/watch-floor, a
#   server that does no work (no disk, no consensus) and answers each put
#   once its events are handed to the transport, or 1 ms after that; the
#   first is about what the tool reads for any server that sends events
#   and answer together, the second the tool's own time once the events
#   are in before the answer;
#   lease-keepalive (10 conns, 100 clients, one lease each; keepalives
#   answered a second, CPU time per keepalive sent, and how many failed:
#   the tool's figures count only the answered ones);
#   big_range: one Range of BENCH_TOTAL keys of 1 KiB (tests/tools/bigrange
#   loads them once, then reads them back whole and checks them): its time,
#   and the sum of the peak resident memory (VmHWM, reset just before
#   through /proc/PID/clear_refs, so root) of the server's processes while
#   it runs, and how far that rose above what they held before; the sum
#   of their proportional set size (PSS, /proc/PID/smaps_rollup: a page
#   shared by N processes counts 1/N in each, so the sum counts it once)
#   before the Range, after the load (the footprint of the put load), and
#   its peak, sampled every 50 ms while the Range runs;
#   defrag: a db of BENCH_DEFRAG_MB MiB of 1 KiB values (1024; --quick
#   makes it 128) with half its keys deleted and compacted away is
#   defragmented (etcdctl defrag) while tests/tools/latprobe sends puts
#   and serializable gets, BENCH_PROBE_RATE (200) a second each on a fixed
#   schedule: the defragmentation's seconds, the db's size (Status) and
#   file size before and after, and the p99 of puts and of gets during it
#   (and the second after) and in the 3 s just before, and during/before
#   (BENCH_PROBE_KEEP=DIR keeps every request's latency, and the
#   servers' logs);
#   snapshot: etcdctl snapshot save of the same db under the same probe
#   (into BENCH_SNAPSHOT_DIR, default the run's directory on the servers'
#   disk; /dev/shm keeps etcdctl's own write and fsync of the file off it):
#   its seconds, the snapshot's size, p99s during and before; both run one
#   round per server (a db defragmented once has nothing left to move);
#   one write + fdatasync on the data dir's disk, the latency floor;
#   footprint: a member of each server started for it (NAME+fp; one round,
#   measured before every other workload, then stopped): the sum of the
#   PSS of all its processes (/proc/PID/smaps_rollup), the tmpfs its
#   region holds (the allocated blocks of the files on /dev/shm its
#   processes hold open: cetcd's region; etcd has none), its db file's
#   size and its data dir's (du), each 2 s after the start (idle), right
#   after the put workload's load (put), and 5 s later (quiet);
#   TLS (tls_put, tls_range_s, tls_h2_range_s, tls_h2_put, tls_conns):
#   a second cetcd and etcd (NAME+tls) with https client URLs and the
#   same certificates (an ECDSA P-256 CA, server and client certificates
#   made with openssl in the work dir): the benchmark tool's put and
#   serializable range with --cacert/--cert/--key, h2load's serializable
#   Range and Put (ALPN h2), each with the server's CPU time per request,
#   and tls_conns: new TLS connections a second, h2load opening
#   BENCH_TLS_CONNS (200) connections at once that each do one Range,
#   repeated, with the server's and h2load's CPU time per connection;
#   auth (auth_put, auth_range_s, auth_h2_put, auth_h2_range_s): a cetcd
#   and an etcd (NAME+auth) with auth enabled (root, and a user bench with
#   readwrite on the keys the tool uses; simple token), the benchmark
#   tool's put and serializable range as bench (it logs in once a
#   connection, inside the measured window) and h2load's Put and
#   serializable Range with a token of bench's, got before the window, in
#   a token header; each alternated with the same run against the servers
#   without auth, so that each server's "with / without auth" is printed,
#   with the server's and the client's CPU time per request;
#   with 3 members, the time from SIGKILL of the leader (every process of
#   that member) to the next acknowledged put through another member,
#   the median of 5 (the member is restarted in between).
# The benchmark tool spreads its connections over every member; h2load
# aims at the leader.
#
# Environment: CETCD_BUILD (default build/), BENCH_TOTAL (100000; --quick
# makes it 10000), BENCH_DIR (where data dirs go; default /var/tmp),
# ETCD_TOOLS (where bench/etcd-tools.sh keeps the benchmark tool),
# BENCH_ROUNDS (3), BENCH_SERVERS ("cetcd etcd"; one of them measures one
# side only; every name but etcd is a cetcd, given the flags in
# BENCH_FLAGS_<name> too, and gets a column of its own: BENCH_SERVERS="cetcd
# g1 etcd" BENCH_FLAGS_g1="--gateways 1" adds a one-gateway cetcd to the
# same alternation, and BENCH_BUILD_<name> gives it another build
# directory, e.g. an older commit's, for an A/B run; the ratios stay
# cetcd's to etcd's; BENCH_FLAGS_etcd gives etcd flags of its own, e.g.
# --unsafe-no-fsync beside a cetcd with it), BENCH_WORKLOADS (names as
# measure gives them, e.g. "watch watch_latency lease_keepalive"; unset
# runs all), BENCH_PIN ("S:C", CPU
# lists for taskset: every server process runs on S and the clients, the
# benchmark tool and h2load, on C, e.g. "0:1"; unset, all share every CPU,
# and on a small machine the client's work is in every server's figures),
# BENCH_SCRAPE (1: every server's /metrics is read once a second while each
# workload runs, as Prometheus would; BENCH_SCRAPE_<name>=1 does it for
# that server only, e.g. an A/B of the same build scraped and not),
# BENCH_LOCK (the lock that keeps two runs on one machine from measuring
# each other; default /tmp/cetcd-bench.lock).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=${CETCD_BUILD:-$root/build}
total=${BENCH_TOTAL:-100000}
defrag_mb_default=1024
members=1
while (($#)); do
  case $1 in
  --quick) total=${BENCH_TOTAL:-10000} defrag_mb_default=128; shift ;;
  --members) members=$2; shift 2 ;;
  *) echo "etcd-compare: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $members == 1 || $members == 3 ]] || { echo "etcd-compare: --members is 1 or 3" >&2; exit 2; }
put1_total=$(( total / 50 < 500 ? 500 : total / 50 ))
watch_puts=$(( total / 200 < 100 ? 100 : total / 200 ))
watchl_total=$(( total / 50 < 200 ? 200 : total / 50 ))
lat_total=$(( total / 30 < 1000 ? 1000 : total / 30 ))
h2_total=$(( total * 2 ))
tools=${ETCD_TOOLS:-$HOME/.cache/cetcd-etcd-tools}
basedir=${BENCH_DIR:-/var/tmp}
srv_pin=() cli_pin=()
if [[ -n ${BENCH_PIN:-} ]]; then
  [[ $BENCH_PIN == ?*:?* ]] || { echo "etcd-compare: BENCH_PIN is S:C, e.g. 0:1" >&2; exit 2; }
  command -v taskset >/dev/null || { echo "etcd-compare: BENCH_PIN needs taskset (util-linux)" >&2; exit 1; }
  srv_pin=(taskset -c "${BENCH_PIN%%:*}") cli_pin=(taskset -c "${BENCH_PIN#*:}")
fi

bash "$root/bench/etcd-tools.sh" "$tools" >&2
bench=$tools/etcd-benchmark
command -v h2load >/dev/null || { echo "etcd-compare: h2load missing (nghttp2-client)" >&2; exit 1; }
[[ -x $build/bin/cetcd ]] || { echo "etcd-compare: build cetcd first (tools/build.sh)" >&2; exit 1; }

# one run at a time on a machine: a second waits for the first
bench_lock etcd-compare

work=$(mktemp -d "$basedir/cetcd-compare.XXXXXX")
server_pids=()
stop_server() {
  local p
  for p in "${server_pids[@]}"; do stop_pid "$p"; done
  server_pids=()
}
trap 'stop_server; rm -rf "$work"' EXIT

# start_member KIND I: member I of the current cluster (flags in margs).
start_member() {
  local name=$1 kind=${1%%+*} i=$2
  if [[ $kind != etcd ]]; then
    local extra="BENCH_FLAGS_$kind" other="BENCH_BUILD_$kind"
    setsid "${srv_pin[@]}" "${!other:-$build}/bin/cetcd" ${margs[i]} ${!extra:-} >>"$work/$name.$i.log" 2>&1 &
  else
    setsid "${srv_pin[@]}" etcd ${margs[i]} ${BENCH_FLAGS_etcd:-} >>"$work/$name.$i.log" 2>&1 &
  fi
  server_pids[i]=$!
}

# The current server's client scheme (https for a NAME+tls server), the
# flags etcdctl needs for it (TLS files, auth's root user) and those the
# benchmark tool needs (TLS files, auth's bench user).
scheme=http ctl_args=() tool_args=()
ctl() { ETCDCTL_API=3 etcdctl "${ctl_args[@]}" "$@"; }

# ready EP: a put through EP is acknowledged.
ready() { put_ready "$1" "${ctl_args[@]}"; }

# start_server NAME: starts cetcd or etcd ($members members) on fresh
# ports and data dirs; sets server_pids, endpoints (all), endpoint (the
# leader's). NAME+tls: client URLs https with the certificates of
# make_certs; NAME+auth: set up by auth_setup once it answers, with
# --bcrypt-cost 4 (etcd's least), so that the benchmark tool's logins, one
# a connection, weigh little in the CPU time per request.
start_server() {
  local name=$1 i initial="" cports=() pports=() extra=""
  scheme=http ctl_args=() tool_args=()
  if [[ $name == *+tls ]]; then
    scheme=https
    extra="--cert-file $work/tls/server.crt --key-file $work/tls/server.key"
    ctl_args=(--cacert "$work/tls/ca.crt" --cert "$work/tls/client.crt" --key "$work/tls/client.key")
    tool_args=("${ctl_args[@]}")
  fi
  [[ $name != *+auth ]] || extra="--bcrypt-cost 4"
  for ((i = 0; i < members; i++)); do
    cports[i]=$(free_port); pports[i]=$(free_port)
    initial+="${initial:+,}m$i=http://127.0.0.1:${pports[i]}"
  done
  margs=()
  endpoints=""
  for ((i = 0; i < members; i++)); do
    margs[i]="--name m$i --data-dir $work/$name.data.$i
      --listen-client-urls $scheme://127.0.0.1:${cports[i]} --advertise-client-urls $scheme://127.0.0.1:${cports[i]} $extra
      --listen-peer-urls http://127.0.0.1:${pports[i]} --initial-advertise-peer-urls http://127.0.0.1:${pports[i]}
      --initial-cluster $initial --log-level error"
    start_member "$name" "$i"
    endpoints+="${endpoints:+,}127.0.0.1:${cports[i]}"
  done
  member_eps=(${endpoints//,/ })
  for _ in $(seq 150); do
    local up=0
    for ((i = 0; i < members; i++)); do ready "${member_eps[i]}" && up=$((up + 1)); done
    if ((up == members)); then
      local li
      li=$(leader_of) || return 1
      endpoint=${member_eps[li]}
      [[ $name != *+auth ]] || auth_setup || return 1
      return 0
    fi
    sleep 0.2
  done
  echo "etcd-compare: $name did not start; its logs:" >&2
  tail -n 20 "$work/$name".*.log >&2
  return 1
}

# leader_of: the index of the member that leads (0 when alone), waiting
# up to 20 s for one to lead; 1 when none does.
leader_of() {
  local i
  ((members == 1)) && { echo 0; return 0; }
  for _ in $(seq 200); do
    for ((i = 0; i < members; i++)); do
      if ctl --endpoints "${member_eps[i]}" --dial-timeout 500ms --command-timeout 1s endpoint status -w json 2>/dev/null |
        python3 -c 'import json,sys; v=json.load(sys.stdin); d=v[0]["Status"] if v else {}; sys.exit(0 if d and d["leader"] == d["header"]["member_id"] else 1)'; then
        echo "$i"; return 0
      fi
    done
    sleep 0.1
  done
  echo "etcd-compare: no member leads" >&2
  return 1
}

# failover_ms KIND: SIGKILL of the leader's whole process group, then ms
# until a put through another member is acknowledged (in $failover);
# restarts the member and waits until it answers and some member leads.
# Not to be called in a subshell: it restarts a member (server_pids).
failover_ms() {
  local kind=$1 li other t0 t1
  failover=0
  li=$(leader_of) || return 0
  other=$(( (li + 1) % members ))
  t0=$(date +%s%3N)
  kill -KILL -- "-${server_pids[li]}" 2>/dev/null || true
  wait "${server_pids[li]}" 2>/dev/null || true
  for _ in $(seq 600); do ready "${member_eps[other]}" && break; done
  t1=$(date +%s%3N)
  start_member "$kind" "$li"
  for _ in $(seq 150); do ready "${member_eps[li]}" && break; sleep 0.2; done
  leader_of >/dev/null || true
  failover=$(( t1 - t0 ))
}

# server_procs: the pids of the servers' processes (their process groups).
server_procs() {
  local f p rest
  declare -A groups=()
  for p in "${server_pids[@]}"; do groups[$p]=1; done
  for f in /proc/[0-9]*/stat; do
    # Field 2 (comm) may hold spaces and parentheses: cut through the
    # last ") ". Then pgrp is field 5.
    rest=$(sed -e 's/^.*) //' "$f" 2>/dev/null) || continue
    read -r -a r <<<"$rest"
    [[ -n ${groups[${r[2]:-x}]:-} ]] || continue
    p=${f#/proc/}
    echo "${p%/stat}"
  done
}

# CPU ticks (user + sys) of the servers' process groups.
server_ticks() {
  local sum=0 p
  for p in $(server_procs); do
    # utime and stime are fields 14 and 15 (12 and 13 after the comm)
    read -r -a r <<<"$(sed -e 's/^.*) //' "/proc/$p/stat" 2>/dev/null)" || continue
    sum=$(( sum + ${r[11]:-0} + ${r[12]:-0} ))
  done
  echo "$sum"
}

# bench_tool ARGS...: runs etcd's benchmark tool; prints "qps p99_ms avg_ms
# errors"
# (of the report after the line holding $bench_section when set: the
# watch command prints a report for creating watchers and then one for
# the events received).
bench_section=""
bench_tool() {
  local out
  out=$("${cli_pin[@]}" /usr/bin/time -o "$work/tool.time" -f "%U %S" \
        "$bench" --endpoints "$endpoints" "${tool_args[@]}" --precise "$@" 2>&1 | tr -d '\r')
  [[ -z $bench_section ]] || out=$(awk -v s="$bench_section" 'index($0, s) { on = 1 } on' <<<"$out")
  local qps p99 avg
  qps=$(awk '/Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '/ 99% in / {print $3*1000}' <<<"$out")
  avg=$(awk '/Average:/ {print $2*1000}' <<<"$out")
  if [[ -z $qps ]]; then
    echo "etcd-compare: benchmark $* gave no result:" >&2; tail -5 <<<"$out" >&2
    echo "0 0 0 0"; return
  fi
  # The tool counts failed requests apart (its figures are the successes').
  local errors=0
  if grep -q "Error distribution" <<<"$out"; then
    echo "etcd-compare: benchmark $* had errors:" >&2
    awk '/Error distribution/ { on = 1 } on' <<<"$out" | head -5 >&2
    errors=$(awk '/Error distribution/ { on = 1; next } on && /^ *\[[0-9]+\]/ { gsub(/[][]/, "", $1); n += $1 } END { print n + 0 }' <<<"$out")
  fi
  echo "$qps ${p99:-0} ${avg:-0} $errors"
}

# bench_tool_cpu N ARGS...: bench_tool's figures, then the servers' CPU
# time (user + sys of all their processes) and the tool's own, in
# microseconds per one of the N units of work the run does.
bench_tool_cpu() {
  local n=$1 t0 t1 r clk
  shift
  clk=$(getconf CLK_TCK)
  t0=$(server_ticks)
  r=$(bench_tool "$@")
  t1=$(server_ticks)
  awk -v r="$r" -v d=$(( t1 - t0 )) -v clk="$clk" -v n="$n" -v cli="$(client_secs "$work/tool.time")" \
    'BEGIN { printf "%s %.2f %.2f\n", r, d / clk / n * 1e6, cli / n * 1e6 }'
}

# client_secs FILE: user + sys seconds in /usr/bin/time's last line of FILE.
client_secs() { tail -n 1 "$1" 2>/dev/null | awk '{ print $1 + $2 }'; }

# grpc_body FILE HEX: writes a gRPC message (5-byte prefix + protobuf).
grpc_body() {
  python3 -c 'import sys; b = bytes.fromhex(sys.argv[2]);
open(sys.argv[1], "wb").write(b"\0" + len(b).to_bytes(4, "big") + b)' "$1" "$2"
}

# h2_alpn: over TLS, h2load offers ALPN h2 alone, as gRPC clients do
# (cetcd picks http/1.1 for a client that offers both).
h2_alpn() { [[ $scheme != https ]] || echo --npn-list=h2; }

# h2_run PATH BODY: h2load with 100 connections x 10 streams (and the
# headers in h2_headers); prints "qps cpu_us_per_req ok_fraction
# client_cpu_us_per_req" (the client's: h2load's, from /usr/bin/time).
h2_headers=()
h2_run() {
  local path=$1 body=$2 t0 t1 out qps ok clk
  clk=$(getconf CLK_TCK)
  t0=$(server_ticks)
  out=$("${cli_pin[@]}" /usr/bin/time -o "$work/h2load.time" -f "%U %S" \
        h2load $(h2_alpn) -n "$h2_total" -c 100 -m 10 -d "$body" \
        -H 'content-type: application/grpc' -H 'te: trailers' "${h2_headers[@]}" \
        "$scheme://$endpoint$path" 2>&1)
  t1=$(server_ticks)
  qps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' <<<"$out")
  ok=$(awk '/^requests:/ {for (i=1;i<=NF;i++) if ($(i+1)=="succeeded,") print $i}' <<<"$out")
  awk -v q="${qps:-0}" -v d=$(( t1 - t0 )) -v clk="$clk" -v n="$h2_total" -v ok="${ok:-0}" \
    -v cli="$(client_secs "$work/h2load.time")" \
    'BEGIN { printf "%s %.1f %.3f %.2f\n", q, d / clk / n * 1e6, ok / n, cli / n * 1e6 }'
}

# wal_syncs: "count sum_seconds" of the server's WAL syncs so far (etcd's
# histogram etcd_disk_wal_fsync_duration_seconds, which cetcd keeps for a
# batch's write and fdatasync and etcd for its fsync).
wal_syncs() {
  local m
  m=$(curl -sf "http://$endpoint/metrics" || true)
  awk '/^etcd_disk_wal_fsync_duration_seconds_count/ { c = $2 }
       /^etcd_disk_wal_fsync_duration_seconds_sum/ { s = $2 }
       END { print c + 0, s + 0 }' <<<"$m"
}

# json_run PATH FILE: h2load over HTTP/1.1, 100 connections each posting
# the JSON body in FILE one request at a time to the JSON gateway; prints
# "qps cpu_us_per_req ok_fraction per_sync sync_ms" (ok: answered 2xx;
# per_sync: requests per WAL sync meanwhile, sync_ms: a sync's mean time;
# 0 when none synced).
json_run() {
  local path=$1 body=$2 t0 t1 out qps ok clk w0 w1
  clk=$(getconf CLK_TCK)
  w0=$(wal_syncs)
  t0=$(server_ticks)
  out=$("${cli_pin[@]}" h2load --h1 -n "$h2_total" -c 100 -m 1 -d "$body" \
        -H 'content-type: application/json' "http://$endpoint$path" 2>&1)
  t1=$(server_ticks)
  w1=$(wal_syncs)
  qps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' <<<"$out")
  ok=$(awk '/^status codes:/ {print $3}' <<<"$out")
  awk -v q="${qps:-0}" -v d=$(( t1 - t0 )) -v clk="$clk" -v n="$h2_total" -v ok="${ok:-0}" \
    -v w0="$w0" -v w1="$w1" 'BEGIN {
      split(w0, a, " "); split(w1, b, " "); c = b[1] - a[1]; s = b[2] - a[2]
      printf "%s %.1f %.3f %.1f %.3f\n", q, d / clk / n * 1e6, ok / n,
        (c > 0 ? n / c : 0), (c > 0 ? s / c * 1e3 : 0) }'
}

# The gRPC status of one request (with the headers in h2_headers), to make
# sure h2load measures answers, not errors (h2load counts any HTTP 200 as
# success).
grpc_status() {
  local path=$1 body=$2
  python3 - "$endpoint" "$path" "$body" "${h2_headers[@]}" <<'EOF' 2>/dev/null || echo "?"
import subprocess, sys
ep, path, body, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
out = subprocess.run(["nghttp", "-v", "-H", "content-type: application/grpc", "-H", "te: trailers",
                      *extra, "-d", body, f"http://{ep}{path}"], capture_output=True, timeout=10).stdout.decode("utf-8", "replace")
for line in out.splitlines():
    if "grpc-status:" in line:
        print(line.split("grpc-status:")[1].strip()); break
else:
    print("?")
EOF
}

fsync_floor_us() {
  python3 - "$work" <<'EOF'
import os, sys, time, statistics
path = os.path.join(sys.argv[1], "fsync-probe")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
buf = b"\0" * 4096
samples = []
for i in range(200):
    t = time.perf_counter()
    os.pwrite(fd, buf, (i % 16) * 4096)
    os.fdatasync(fd)
    samples.append((time.perf_counter() - t) * 1e6)
os.close(fd); os.unlink(path)
print(f"{statistics.median(samples):.0f}")
EOF
}

# Request bodies. RangeRequest{key="foo"} (+ serializable=true);
# PutRequest{key="foo", value=256 bytes}.
range_l=$work/range_l.bin; range_s=$work/range_s.bin; put=$work/put.bin
grpc_body "$range_l" "0a03666f6f"
grpc_body "$range_s" "0a03666f6f3801"
grpc_body "$put" "0a03666f6f128002$(printf '61%.0s' $(seq 256))"
json_range=$work/range.json; json_put=$work/put.json
printf '{"key":"Zm9v","serializable":true}' >"$json_range"
printf '{"key":"Zm9v","value":"%s"}' "$(head -c 256 /dev/zero | tr '\0' a | base64 -w0)" >"$json_put"

declare -A R S_PIDS S_EPS S_EP S_MARGS S_SCHEME S_CTL S_TOOL
servers=${BENCH_SERVERS:-cetcd etcd}
rounds=${BENCH_ROUNDS:-3}

# Both servers run side by side (the idle one costs next to nothing);
# each workload runs $rounds times, alternating the servers and which one
# goes first, and the median of each figure is kept, so that the noise of
# a shared machine falls on both sides alike.
save_server() {
  S_PIDS[$1]="${server_pids[*]}"; S_EPS[$1]=$endpoints; S_EP[$1]=$endpoint
  S_SCHEME[$1]=$scheme S_CTL[$1]="${ctl_args[*]}" S_TOOL[$1]="${tool_args[*]}"
  local i
  for i in "${!margs[@]}"; do S_MARGS[$1.$i]=${margs[i]}; done
}
use_server() {
  read -r -a server_pids <<<"${S_PIDS[$1]}"
  endpoints=${S_EPS[$1]}; endpoint=${S_EP[$1]}; member_eps=(${endpoints//,/ })
  scheme=${S_SCHEME[$1]}
  read -r -a ctl_args <<<"${S_CTL[$1]}"
  read -r -a tool_args <<<"${S_TOOL[$1]}"
  local i
  margs=()
  for ((i = 0; i < members; i++)); do margs[i]=${S_MARGS[$1.$i]}; done
}
stop_all() {
  local s
  for s in "${!S_PIDS[@]}"; do use_server "$s"; stop_server; done
  S_PIDS=()
  stop_server
}
trap 'scrape_end; stop_all; rm -rf "$work"' EXIT

# scrape_begin SERVER: with BENCH_SCRAPE or BENCH_SCRAPE_<SERVER>, reads
# the leader's /metrics once a second in the background (on the clients'
# CPUs) until scrape_end; counts the scrapes that failed in $work/scrape.err.
scrape_pid=""
scrape_begin() {
  local own="BENCH_SCRAPE_${1%%+*}"
  [[ ${BENCH_SCRAPE:-} == 1 || ${!own:-} == 1 ]] || return 0
  ( while :; do
      "${cli_pin[@]}" curl -sfk -o /dev/null "$scheme://$endpoint/metrics" || echo "$1" >>"$work/scrape.err"
      sleep 1
    done ) &
  scrape_pid=$!
}
scrape_end() {
  [[ -n $scrape_pid ]] || return 0
  kill "$scrape_pid" 2>/dev/null || true
  wait "$scrape_pid" 2>/dev/null || true
  scrape_pid=""
}

# measure NAME FIELDS CMD...: runs CMD (printing space-separated figures)
# against every server, $rounds times; R[server.FIELD] gets each figure's
# median (FIELDS: the names, "_" to drop one).
measure() {
  local name=$1 fields=$2 k server order f i
  shift 2
  [[ -z ${BENCH_WORKLOADS:-} || " $BENCH_WORKLOADS " == *" $name "* ]] || return 0
  declare -A got=()
  for ((k = 0; k < rounds; k++)); do
    order=$servers
    ((k % 2)) && order=$(tr ' ' '\n' <<<"$servers" | tac | tr '\n' ' ')
    for server in $order; do
      use_server "$server"
      scrape_begin "$server"
      read -r -a vals < <("$@")
      scrape_end
      i=0
      for f in $fields; do
        [[ $f != _ ]] && got[$server.$f]+="${vals[i]:-0} "
        i=$((i + 1))
      done
    done
  done
  for f in "${!got[@]}"; do R[$f]=$(tr ' ' '\n' <<<"${got[$f]}" | grep . | median); done
  echo "etcd-compare: $name done" >&2
}

# wants NAME...: one of the workloads is selected (BENCH_WORKLOADS).
wants() {
  local n
  [[ -z ${BENCH_WORKLOADS:-} ]] && return 0
  for n; do [[ " $BENCH_WORKLOADS " == *" $n "* ]] && return 0; done
  return 1
}

# make_certs: in $work/tls, a CA (ECDSA P-256), a server certificate for
# 127.0.0.1 and localhost and a client certificate, both signed by it;
# the same files serve every server.
make_certs() {
  local d=$work/tls n
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=bench-ca -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
  for n in server client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench-$n" \
      -keyout "$d/$n.key" -out "$d/$n.csr" 2>/dev/null
    openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/$n.ext" -out "$d/$n.crt" 2>/dev/null
  done
}

# auth_setup: on the server just started (endpoint), users root and bench
# (password = name + "pw"), a role bench with readwrite on the prefixes
# "foo" and "\0" (the benchmark tool's put keys with --key-space-size 1
# are 8 zero bytes; granted through the JSON gateway, as etcdctl cannot
# pass a NUL), then auth enabled; etcdctl acts as root, the benchmark
# tool as bench.
auth_bench=bench:benchpw
auth_setup() {
  local ep=$endpoint
  { ctl --endpoints "$ep" user add root:rootpw &&
    ctl --endpoints "$ep" user add "$auth_bench" &&
    ctl --endpoints "$ep" role add bench &&
    ctl --endpoints "$ep" user grant-role bench bench &&
    ctl --endpoints "$ep" role grant-permission bench readwrite foo --prefix &&
    curl -sf "$scheme://$ep/v3/auth/role/grant" \
      -d '{"name":"bench","perm":{"permType":"READWRITE","key":"AA==","range_end":"AQ=="}}' &&
    ctl --endpoints "$ep" auth enable; } >>"$work/auth-setup.log" 2>&1 ||
    { echo "etcd-compare: auth setup failed on $ep: $(tail -3 "$work/auth-setup.log")" >&2; return 1; }
  # Auth must now refuse a put with no user, or the runs measure nothing.
  if ctl --endpoints "$ep" --command-timeout 2s put foo bar >>"$work/auth-setup.log" 2>&1; then
    echo "etcd-compare: $ep took a put with no user after auth enable" >&2; return 1
  fi
  ctl_args+=(--user root:rootpw)
  tool_args+=(--user "$auth_bench")
}

# auth_h2_run PATH BODY: h2_run as user bench on a NAME+auth server: one
# login through the JSON gateway before the measured window, then its
# token in a token header of every request, as etcd's clients send it
# (h2load sends it HPACK-indexed, so it costs the client next to
# nothing); on a server without auth, h2_run as it is. All figures 0 when
# one request so sent is not answered gRPC status 0.
auth_h2_run() {
  local tok="" st
  h2_headers=()
  if [[ " ${tool_args[*]} " == *" --user "* ]]; then
    tok=$(curl -sf "$scheme://$endpoint/v3/auth/authenticate" \
          -d "{\"name\":\"${auth_bench%%:*}\",\"password\":\"${auth_bench#*:}\"}" |
          python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])') || tok=""
    [[ -n $tok ]] && h2_headers=(-H "token: $tok")
  fi
  st=$(grpc_status "$1" "$2")
  if [[ $st != 0 ]] || [[ -z $tok && " ${tool_args[*]} " == *" --user "* ]]; then
    echo "etcd-compare: $endpoint$1 as ${auth_bench%%:*}: gRPC status $st" >&2
    h2_headers=()
    echo "0 0 0 0"
    return
  fi
  h2_run "$@"
  h2_headers=()
}

# The variants: NAME+tls for each server when a tls_ workload is
# selected, NAME+auth when an auth_ one is.
tls_servers="" auth_servers="" fp_servers=""
for server in $servers; do
  wants footprint && fp_servers+="${fp_servers:+ }$server+fp"
  wants tls_put tls_range_s tls_h2_range_s tls_h2_put tls_conns && tls_servers+="${tls_servers:+ }$server+tls"
  wants auth_put auth_range_s auth_h2_put auth_h2_range_s && auth_servers+="${auth_servers:+ }$server $server+auth"
done
[[ -z $tls_servers ]] || make_certs
for server in $fp_servers $servers $tls_servers $auth_servers; do
  [[ -z ${S_PIDS[$server]:-} ]] || continue
  echo "etcd-compare: starting $server" >&2
  start_server "$server"
  ctl --endpoints "$endpoint" put foo bar >/dev/null
  save_server "$server"
done
# member_dir: the data dir of the member at $endpoint; member_db: its db file.
member_dir() {
  local i
  for i in "${!member_eps[@]}"; do
    [[ ${member_eps[i]} == "$endpoint" ]] || continue
    sed -n 's|.*--data-dir \([^ ]*\).*|\1|p' <<<"${margs[i]}"
    return 0
  done
}
member_db() { echo "$(member_dir)/member/snap/db"; }
# pss_kib PID...: the sum of the processes' PSS in KiB (a page shared by
# several of them counted once over all; a process gone counts 0).
pss_kib() {
  local p sum=0 v
  for p; do
    v=$(awk '$1 == "Pss:" { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null) || v=0
    sum=$(( sum + ${v:-0} ))
  done
  echo "$sum"
}
# shm_kib PID...: the tmpfs the processes hold open on /dev/shm (cetcd's
# region, a file without a name there), in KiB: each file's allocated
# blocks, once however many processes hold it.
shm_kib() {
  local p fd
  for p; do
    for fd in /proc/"$p"/fd/*; do
      [[ $(readlink "$fd" 2>/dev/null) == /dev/shm/* ]] && stat -L -c '%i %b %B' "$fd" 2>/dev/null
    done
  done | sort -u | awk '{ s += $2 * $3 } END { printf "%d\n", s / 1024 }'
}
# footprint_now: "pss region db dir" of the current server, in MiB (one
# decimal): the PSS of all its processes, the tmpfs of its region, its
# db file's size and its whole data dir's (du: blocks allocated, WAL
# segments preallocated included).
footprint_now() {
  local procs db dir
  procs=$(server_procs)
  db=$(member_db) dir=$(member_dir)
  # shellcheck disable=SC2086 # a list of pids
  awk -v p="$(pss_kib $procs)" -v r="$(shm_kib $procs)" -v d="$(stat -c %s "$db" 2>/dev/null || echo 0)" \
      -v t="$(du -sk "$dir" | cut -f1)" 'BEGIN { printf "%.1f %.1f %.1f %.1f", p / 1024, r / 1024, d / 1048576, t / 1024 }'
}
# footprint: on a member started for it (NAME+fp), idle a few seconds
# after its start, right after a put load (the put workload's), and 5 s
# later, quiet; prints the three footprint_now figures in a row.
footprint() {
  local idle put
  sleep 2
  idle=$(footprint_now)
  bench_tool --conns 100 --clients 1000 put --key-size 8 --sequential-keys \
    --total "$total" --val-size 256 >/dev/null
  put=$(footprint_now)
  sleep 5
  echo "$idle $put $(footprint_now)"
}
fp_fields="fp_idle_pss_mb fp_idle_region_mb fp_idle_db_mb fp_idle_dir_mb fp_put_pss_mb fp_put_region_mb
  fp_put_db_mb fp_put_dir_mb fp_quiet_pss_mb fp_quiet_region_mb fp_quiet_db_mb fp_quiet_dir_mb"
servers=$fp_servers rounds=1 measure footprint "$fp_fields" footprint
for server in $fp_servers; do
  use_server "$server"; stop_server; unset "S_PIDS[$server]"
done
measure put "put_qps put_p99 _ _ put_cpu" bench_tool_cpu "$total" --conns 100 --clients 1000 \
  put --key-size 8 --sequential-keys --total "$total" --val-size 256
measure range_l "range_l_qps _ _" bench_tool --conns 100 --clients 1000 \
  range foo --consistency l --total "$total"
measure range_s "range_s_qps _ _" bench_tool --conns 100 --clients 1000 \
  range foo --consistency s --total "$total"
measure put1 "put1_qps _ put1_avg" bench_tool --conns 1 --clients 1 \
  put --key-size 8 --sequential-keys --total "$put1_total" --val-size 256
# lat_run: one client, one request at a time (one connection): the
# benchmark tool's put (8-byte sequential keys, 256-byte values) and
# linearizable Range of "foo", each its mean, p50 and p99, then h2load's
# gRPC Put and linearizable Range with -c 1 -m 1 (its mean); in us; then
# the server's own mean WAL sync (wal_syncs) during the tool's puts and
# during h2load's, in us.
lat_run() {
  local t out f s0 s1 syncs=()
  for t in "put --key-size 8 --sequential-keys --val-size 256" "range foo --consistency l"; do
    s0=$(wal_syncs)
    out=$("${cli_pin[@]}" "$bench" --endpoints "$endpoint" "${tool_args[@]}" --precise --conns 1 --clients 1 \
          $t --total "$lat_total" 2>&1 | tr -d '\r')
    [[ $t == put* ]] && syncs+=("$s0 $(wal_syncs)")
    for f in Average: " 50% in " " 99% in "; do
      awk -v f="$f" 'index($0, f) { v = (f == "Average:" ? $2 : $3) } END { printf "%.1f ", v * 1e6 }' <<<"$out"
    done
  done
  for t in "Put $put" "Range $range_l"; do
    s0=$(wal_syncs)
    out=$("${cli_pin[@]}" h2load $(h2_alpn) -n "$lat_total" -c 1 -m 1 -d "${t#* }" \
          -H 'content-type: application/grpc' -H 'te: trailers' "${h2_headers[@]}" \
          "$scheme://$endpoint/etcdserverpb.KV/${t%% *}" 2>&1)
    [[ $t == Put* ]] && syncs+=("$s0 $(wal_syncs)")
    awk '/^time for request:/ { v = $6; if (v ~ /ms$/) v *= 1000; else if (v ~ /us$/) v += 0; else v *= 1e6 }
         END { printf "%.1f ", v }' <<<"$out"
  done
  for s1 in "${syncs[@]}"; do
    # (the comparison in parentheses: a bare > in printf's arguments is
    # awk's output redirection)
    awk '{ printf "%.1f ", ($3 > $1) ? ($4 - $2) / ($3 - $1) * 1e6 : 0 }' <<<"$s1"
  done
  echo
}
measure latency "lat_put_avg_us lat_put_p50_us lat_put_p99_us lat_range_l_avg_us lat_range_l_p50_us lat_range_l_p99_us
  lat_h2_put_avg_us lat_h2_range_l_avg_us lat_put_sync_us lat_h2_put_sync_us" lat_run
measure txn "txn_qps _ _" bench_tool --conns 100 --clients 1000 \
  txn-put --key-size 8 --val-size 256 --total "$total"
bench_section="Watch events received summary"
measure watch "watch_events_qps _ _ _ watch_cpu" bench_tool_cpu $(( watch_puts * 1000 )) --conns 10 --clients 10 \
  watch --streams 100 --watch-per-stream 100 --watched-key-total 10 --key-space-size 10 \
  --sequential-keys --put-total "$watch_puts" --put-rate 1000000
bench_section=""
measure watch_latency "_ watch_latency_p99 watch_latency_avg" bench_tool --conns 10 --clients 100 \
  watch-latency --total "$watchl_total" --put-rate 200
# wire_run: watch-latency under a capture of the servers' client ports;
# prints "write_p50 write_p99 ack_p99" in ms (watch-wire.py).
wire_run() {
  if ! command -v tcpdump >/dev/null; then
    echo "etcd-compare: no tcpdump, watch_wire skipped" >&2; echo "0 0 0"; return
  fi
  local ports=() ep filter="" cap=$work/wire.pcap tp
  for ep in ${endpoints//,/ }; do
    ports+=("${ep##*:}"); filter+="${filter:+ or }port ${ep##*:}"
  done
  tcpdump -i lo -nn -B 16384 -w "$cap" "tcp and ($filter)" 2>/dev/null &
  tp=$!
  sleep 1
  "${cli_pin[@]}" "$bench" --endpoints "$endpoints" --conns 10 --clients 100 watch-latency \
    --total "$watchl_total" --put-rate 200 >/dev/null 2>&1 || true
  sleep 0.3
  kill "$tp" 2>/dev/null || true
  wait "$tp" 2>/dev/null || true
  tcpdump -nn -tt -r "$cap" 2>/dev/null | python3 "$root/bench/watch-wire.py" "${ports[@]}" | cut -d' ' -f1-3
  rm -f "$cap"
}
measure watch_wire "wire_write_p50 wire_write_p99 wire_ack_p99" wire_run
# floor_run LEAD: the same watch-latency run against bench/watch-floor, a
# server that does no work and answers a put LEAD after handing its
# events to the transport; prints "p99_ms avg_ms".
floor_run() {
  local port p r endpoints
  port=$(free_port)
  "${srv_pin[@]}" "$tools/watch-floor" -listen "127.0.0.1:$port" -lead "$1" 2>>"$work/floor.log" &
  p=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  endpoints=127.0.0.1:$port
  r=$(bench_tool --conns 10 --clients 100 watch-latency --total "$watchl_total" --put-rate 200)
  stop_pid "$p"
  awk '{ print $2, $3 }' <<<"$r"
}
# watch_floor: floor_run with no lead and with 1 ms, $rounds times; not
# a server of the alternation, so it gets a column of its own.
if [[ -z ${BENCH_WORKLOADS:-} || " $BENCH_WORKLOADS " == *" watch_floor "* ]]; then
  declare -A floor_got=()
  for ((k = 0; k < rounds; k++)); do
    for lead in 0 1ms; do
      read -r p99 avg < <(floor_run "$lead")
      floor_got[$lead.p99]+="$p99 " floor_got[$lead.avg]+="$avg "
    done
  done
  for f in "${!floor_got[@]}"; do R[floor.$f]=$(tr ' ' '\n' <<<"${floor_got[$f]}" | grep . | median); done
  echo "etcd-compare: watch_floor done" >&2
fi
measure lease_keepalive "keepalive_qps keepalive_p99 _ keepalive_errors keepalive_cpu" bench_tool_cpu "$total" --conns 10 --clients 100 \
  lease-keepalive --total "$total"
# big_range: one Range of $total keys of 1 KiB (about 105 MB; loaded once
# per server by tests/tools/bigrange, in txns of 100 puts), read back
# whole and checked by it; prints "ms peak_mb grew_mb pss_mb peak_pss_mb":
# the Range's time, the sum of the peak resident memory (VmHWM) of the
# server's processes while it ran (each peak reset first through
# /proc/PID/clear_refs; pages shared by several processes, the db's page
# cache and the shared region, count in each), how far that sum rose
# above their resident memory before, the sum of their PSS before the
# Range (after the load), and the peak of that sum sampled every 50 ms
# while the Range ran (shared pages counted once; a peak between two
# samples can be missed).
big_range() {
  local args=(-endpoint "$endpoint" -prefix bigr -n "$total" -size 1024) p ms before=0 peak=0
  if [[ -z $(ETCDCTL_API=3 etcdctl --endpoints "$endpoint" get bigr/00000000 --keys-only) ]]; then
    "${cli_pin[@]}" "$tools/bigrange" load "${args[@]}" -batch 100 >/dev/null
  fi
  local procs pss0 pss_peak v out=$work/big_range.out getter
  procs=$(server_procs)
  for p in $procs; do
    echo 5 >"/proc/$p/clear_refs"
    before=$(( before + $(awk '$1 == "VmRSS:" { print $2 }' "/proc/$p/status") ))
  done
  # shellcheck disable=SC2086 # a list of pids
  pss0=$(pss_kib $procs)
  pss_peak=$pss0
  "${cli_pin[@]}" "$tools/bigrange" get "${args[@]}" >"$out" &
  getter=$!
  while kill -0 "$getter" 2>/dev/null; do
    # shellcheck disable=SC2086
    v=$(pss_kib $procs)
    ((v > pss_peak)) && pss_peak=$v
    sleep 0.05
  done
  wait "$getter" || true
  ms=$(awk '$1 == "ms" { print $2 }' "$out")
  for p in $procs; do peak=$(( peak + $(awk '$1 == "VmHWM:" { print $2 }' "/proc/$p/status") )); done
  echo "${ms:-0} $(( peak / 1024 )) $(( (peak - before) / 1024 )) $(( pss0 / 1024 )) $(( pss_peak / 1024 ))"
}
measure big_range "big_range_ms big_range_peak_mb big_range_grew_mb big_range_pss_mb big_range_peak_pss_mb" big_range

# defrag and snapshot share one db per server (the leader's, with 3
# members): about $defrag_mb MiB of 1 KiB values put by two bigrange
# loaders at once (prefixes dfa and dfb, so that their revisions
# interleave), then every dfb key deleted and the history compacted
# physically, which frees about half the file's pages, scattered. Under
# each, tests/tools/latprobe sends puts and serializable gets (100 keys,
# 256-byte values) on one connection each, $probe_rate a second each on
# a fixed schedule: a latency counts from the time the schedule gave its
# request, so a server that stops answering shows as every request due
# meanwhile being late. p99 of the requests answered in the
# $probe_before_ms ms just before the operation, and of those in flight
# at any time from its start to $probe_after_ms ms after its end (what
# follows a switch of files can stall the requests right after etcdctl
# has its answer); the operation's time is etcdctl's, start to exit.
defrag_mb=${BENCH_DEFRAG_MB:-$defrag_mb_default}
probe_rate=${BENCH_PROBE_RATE:-200}
probe_before_ms=3000 probe_after_ms=1000
dctl() { ETCDCTL_API=3 etcdctl --endpoints "$endpoint" --dial-timeout 5s --command-timeout 1200s "$@"; }
# db_status FIELD: the endpoint's Status field: revision, or dbSize (its
# high-water mark: cetcd's file may reach past it, grown ahead of use).
db_status() {
  dctl endpoint status -w json | python3 -c 'import json, sys
d = json.load(sys.stdin)[0]["Status"]
print(d["header"]["revision"] if sys.argv[1] == "revision" else d[sys.argv[1]] >> 20)' "$1"
}
# fragment_db: the db described above, once per server.
fragment_db() {
  local mark=$work/fragmented.${endpoint//[:.]/_} half=$(( defrag_mb * 512 )) p pids=() t0 rev
  [[ -e $mark ]] && return 0
  t0=$(date +%s)
  for p in dfa dfb; do
    "${cli_pin[@]}" "$tools/bigrange" load -endpoint "$endpoint" -prefix "$p" -n "$half" -size 1024 \
      -batch 100 >"$work/load.$p.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "etcd-compare: bigrange load failed: $(cat "$work"/load.*.out)" >&2; return 1; }
  done
  dctl del --prefix dfb/ >/dev/null || { echo "etcd-compare: del --prefix dfb/ failed" >&2; return 1; }
  rev=$(db_status revision)
  dctl compact "$rev" --physical >/dev/null || { echo "etcd-compare: compact failed" >&2; return 1; }
  # The load's dirty pages written back before the probe's window, so
  # that it sees the server's steady state rather than the disk's backlog.
  sync
  sleep 2
  touch "$mark"
  echo "etcd-compare: $endpoint: $(( half * 2 )) keys of 1 KiB put, half deleted, compacted" \
    "in $(( $(date +%s) - t0 )) s" >&2
}
# probe_begin: latprobe started, and the time before the operation let
# pass; probe_end NAME T1 T2 (the operation's start and end, unix ms):
# stopped once the window after it is over (with BENCH_PROBE_KEEP=DIR its latencies are
# copied to DIR/NAME.PORT.lat, T1 T2 to DIR/NAME.PORT.times, and the
# servers' logs so far to DIR);
# probe_p99 T1 T2: "put_before put_during get_before get_during" (p99,
# ms), and on a second line how many requests failed.
probe_begin() {
  rm -f "$work/probe"
  "${cli_pin[@]}" "$tools/latprobe" -endpoint "$endpoint" -prefix dflat -rate "$probe_rate" \
    -out "$work/probe" >"$work/probe.out" 2>&1 &
  probe_pid=$!
  sleep $(( probe_before_ms / 1000 + 1 ))
}
probe_end() {
  sleep $(( probe_after_ms / 1000 + 1 ))
  kill -TERM "$probe_pid"
  wait "$probe_pid" || echo "etcd-compare: latprobe: $(head -3 "$work/probe.out")" >&2
  if [[ -n ${BENCH_PROBE_KEEP:-} ]]; then
    cp "$work/probe" "$BENCH_PROBE_KEEP/$1.${endpoint##*:}.lat"
    echo "$2 $3" >"$BENCH_PROBE_KEEP/$1.${endpoint##*:}.times"
    cp "$work"/*.log "$BENCH_PROBE_KEEP/" 2>/dev/null || true
  fi
}
probe_p99() {
  python3 - "$work/probe" "$1" "$(( $2 + probe_after_ms ))" "$probe_before_ms" <<'EOF'
import math, sys
path, a, b, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
got = {}
for line in open(path):
    f = line.split()
    if len(f) != 3:
        continue
    t, kind, ms = int(f[0]), f[1], int(f[2]) / 1000
    if a - w <= t and t + ms < a:
        got.setdefault((kind, "before"), []).append(ms)
    elif t <= b and t + ms >= a:
        got.setdefault((kind, "during"), []).append(ms)
def p99(v):
    v = sorted(v)
    return v[math.ceil(len(v) * 0.99) - 1] if v else 0
keys = [(k, w) for k in ("put", "get") for w in ("before", "during")]
print(" ".join(f"{p99(got.get(k, [])):.2f}" for k in keys))
print("etcd-compare: probe requests " +
      " ".join(f"{k}_{w}={len(got.get((k, w), []))}" for k, w in keys), file=sys.stderr)
for k in ("put", "get"):
    lim, dur = 2 * p99(got.get((k, "before"), [])), got.get((k, "during"), [])
    print(f"etcd-compare: {k}s during over twice the p99 before: {sum(v > lim for v in dur)}"
          f" of {len(dur)}, slowest {max(dur, default=0):.1f} ms", file=sys.stderr)
EOF
  grep -c '^error' "$work/probe.out" || true
}
# x_of BEFORE DURING: DURING / BEFORE
x_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a > 0 ? b / a : 0) }'; }
# defrag_run: etcdctl defrag of the fragmented db under the probe; prints
# "s db_before_mb db_after_mb file_before_mb file_after_mb put_before
# put_during put_x range_before range_during range_x errors" (db: Status's
# dbSize; file: the file's size).
defrag_run() {
  fragment_db || { echo 0; return; }
  local db s0 s1 d0 d1 t1 t2 pb pd gb gd errors
  db=$(member_db)
  s0=$(stat -c %s "$db") d0=$(db_status dbSize)
  probe_begin
  t1=$(date +%s%3N)
  dctl defrag >"$work/op.out" 2>&1 || echo "etcd-compare: defrag failed: $(cat "$work/op.out")" >&2
  t2=$(date +%s%3N)
  probe_end defrag "$t1" "$t2"
  { read -r pb pd gb gd; read -r errors; } < <(probe_p99 "$t1" "$t2")
  s1=$(stat -c %s "$db") d1=$(db_status dbSize)
  awk -v ms=$(( t2 - t1 )) 'BEGIN { printf "%.2f ", ms / 1000 }'
  echo "$d0 $d1 $(( s0 >> 20 )) $(( s1 >> 20 )) $pb $pd $(x_of "$pb" "$pd") $gb $gd $(x_of "$gb" "$gd") $errors"
}
# snapshot_run: etcdctl snapshot save of the same db under the probe;
# prints "s snapshot_mb put_before put_during put_x range_before
# range_during range_x errors".
snapshot_run() {
  fragment_db || { echo 0; return; }
  local snap=${BENCH_SNAPSHOT_DIR:-$work}/snapshot.db t1 t2 pb pd gb gd errors size
  rm -f "$snap"
  probe_begin
  t1=$(date +%s%3N)
  dctl snapshot save "$snap" >"$work/op.out" 2>&1 ||
    echo "etcd-compare: snapshot save failed: $(tail -3 "$work/op.out")" >&2
  t2=$(date +%s%3N)
  probe_end snapshot "$t1" "$t2"
  { read -r pb pd gb gd; read -r errors; } < <(probe_p99 "$t1" "$t2")
  size=$(stat -c %s "$snap" 2>/dev/null || echo 0)
  rm -f "$snap"
  awk -v ms=$(( t2 - t1 )) 'BEGIN { printf "%.2f ", ms / 1000 }'
  echo "$(( size >> 20 )) $pb $pd $(x_of "$pb" "$pd") $gb $gd $(x_of "$gb" "$gd") $errors"
}
# One round each: a second defragmentation would find nothing to do.
rounds=1 measure defrag "defrag_s defrag_db_before_mb defrag_db_after_mb defrag_file_before_mb
  defrag_file_after_mb defrag_put_before_p99
  defrag_put_during_p99 defrag_put_x defrag_range_before_p99 defrag_range_during_p99 defrag_range_x
  defrag_probe_errors" defrag_run
rounds=1 measure snapshot "snapshot_s snapshot_mb snapshot_put_before_p99 snapshot_put_during_p99
  snapshot_put_x snapshot_range_before_p99 snapshot_range_during_p99 snapshot_range_x
  snapshot_probe_errors" snapshot_run

for server in $servers; do
  use_server "$server"
  R[$server.h2_status]="range_s:$(grpc_status /etcdserverpb.KV/Range "$range_s") put:$(grpc_status /etcdserverpb.KV/Put "$put")"
done
measure h2_range_s "h2_range_s_qps h2_range_s_cpu h2_range_s_ok" h2_run /etcdserverpb.KV/Range "$range_s"
measure h2_range_l "h2_range_l_qps h2_range_l_cpu h2_range_l_ok" h2_run /etcdserverpb.KV/Range "$range_l"
measure h2_put "h2_put_qps h2_put_cpu h2_put_ok" h2_run /etcdserverpb.KV/Put "$put"
measure json_range "json_range_qps json_range_cpu json_range_ok" json_run /v3/kv/range "$json_range"
measure json_put "json_put_qps json_put_cpu json_put_ok json_put_per_sync json_put_sync_ms" json_run /v3/kv/put "$json_put"

# tls_conn_run: new TLS connections a second: h2load, $reps times, with
# $tls_conns connections at once, each doing its handshake (ALPN h2) and
# one serializable Range; prints "conns_per_s server_cpu_us_per_conn
# client_cpu_us_per_conn ok_fraction" (the rate from h2load's own
# times, start of connecting to the last answer, summed over the runs;
# the client's CPU is h2load's, from /usr/bin/time).
tls_conns=${BENCH_TLS_CONNS:-200}
tls_conn_run() {
  local reps=$(( total / 2000 < 5 ? 5 : total / 2000 )) k t0 t1 out clk secs=0 ok=0 cli
  clk=$(getconf CLK_TCK)
  rm -f "$work/h2load.time"
  t0=$(server_ticks)
  for ((k = 0; k < reps; k++)); do
    out=$("${cli_pin[@]}" /usr/bin/time -a -o "$work/h2load.time" -f "%U %S" \
          h2load $(h2_alpn) -n "$tls_conns" -c "$tls_conns" -m 1 -d "$range_s" \
          -H 'content-type: application/grpc' -H 'te: trailers' \
          "$scheme://$endpoint/etcdserverpb.KV/Range" 2>&1)
    [[ $k != 0 ]] || echo "etcd-compare: tls_conns: $(grep -E '^(TLS Protocol|Cipher|Server Temp Key|Application protocol):' <<<"$out" | tr '\n' ' ')" >&2
    secs=$(awk -v s="$secs" -v c="$tls_conns" '/^finished in/ { gsub(",", "", $4); print s + ($4 > 0 ? c / $4 : 0) }' <<<"$out")
    ok=$(( ok + $(awk '/^requests:/ {for (i=1;i<=NF;i++) if ($(i+1)=="succeeded,") print $i}' <<<"$out") ))
  done
  t1=$(server_ticks)
  cli=$(awk '{ s += $1 + $2 } END { print s + 0 }' "$work/h2load.time")
  awk -v s="$secs" -v n=$(( reps * tls_conns )) -v d=$(( t1 - t0 )) -v clk="$clk" -v cli="$cli" -v ok="$ok" \
    'BEGIN { printf "%.0f %.1f %.1f %.3f\n", (s > 0 ? n / s : 0), d / clk / n * 1e6, cli / n * 1e6, ok / n }'
}
# TLS: the same workloads against NAME+tls (https client URLs, the same
# certificates for every server; the benchmark tool gets --cacert, --cert
# and --key, h2load negotiates h2 by ALPN).
servers=$tls_servers measure tls_put "tls_put_qps tls_put_p99 _ _ tls_put_cpu" bench_tool_cpu "$total" \
  --conns 100 --clients 1000 put --key-size 8 --sequential-keys --total "$total" --val-size 256
servers=$tls_servers measure tls_range_s "tls_range_s_qps _ _ _ tls_range_s_cpu" bench_tool_cpu "$total" \
  --conns 100 --clients 1000 range foo --consistency s --total "$total"
servers=$tls_servers measure tls_h2_range_s "tls_h2_range_s_qps tls_h2_range_s_cpu tls_h2_range_s_ok" \
  h2_run /etcdserverpb.KV/Range "$range_s"
servers=$tls_servers measure tls_h2_put "tls_h2_put_qps tls_h2_put_cpu tls_h2_put_ok" h2_run /etcdserverpb.KV/Put "$put"
servers=$tls_servers measure tls_conns "tls_conns_qps tls_conns_cpu tls_conns_client_cpu tls_conns_ok" tls_conn_run
# Auth: put and serializable range through the benchmark tool as user
# bench (simple token), against NAME+auth and, in the same alternation,
# NAME without auth.
servers=$auth_servers measure auth_put "auth_put_qps auth_put_p99 _ auth_put_errors auth_put_cpu auth_put_client_cpu" bench_tool_cpu \
  "$total" --conns 100 --clients 1000 put --key-size 8 --sequential-keys --total "$total" --val-size 256
servers=$auth_servers measure auth_range_s "auth_range_s_qps auth_range_s_p99 _ auth_range_s_errors auth_range_s_cpu
  auth_range_s_client_cpu" bench_tool_cpu "$total" --conns 100 --clients 1000 range foo --consistency s --total "$total"
# The same through h2load with a token header (auth_h2_run), a client
# that spends no more a request with auth than without.
servers=$auth_servers measure auth_h2_put "auth_h2_put_qps auth_h2_put_cpu auth_h2_put_ok auth_h2_put_client_cpu" \
  auth_h2_run /etcdserverpb.KV/Put "$put"
servers=$auth_servers measure auth_h2_range_s "auth_h2_range_s_qps auth_h2_range_s_cpu auth_h2_range_s_ok
  auth_h2_range_s_client_cpu" auth_h2_run /etcdserverpb.KV/Range "$range_s"
if ((members > 1)); then
  for server in $servers; do
    use_server "$server"
    fo=()
    for _ in 1 2 3 4 5; do failover_ms "$server"; fo+=("$failover"); done
    save_server "$server"
    R[$server.failover_ms]=$(printf '%s\n' "${fo[@]}" | median)
    echo "etcd-compare: $server failovers (ms): ${fo[*]}" >&2
  done
fi
stop_all
fsync_us=$(fsync_floor_us)

row() { local k=$1; shift; printf '%-28s' "$k"; printf ' %14s' "$@"; printf '\n'; }
read -r -a cols <<<"$servers"
row "workload" "${cols[@]}"
for k in put_qps put_p99 put_cpu range_l_qps range_s_qps put1_qps put1_avg \
         lat_put_avg_us lat_put_p50_us lat_put_p99_us lat_range_l_avg_us lat_range_l_p50_us lat_range_l_p99_us \
         lat_h2_put_avg_us lat_h2_range_l_avg_us lat_put_sync_us lat_h2_put_sync_us txn_qps \
         watch_events_qps watch_cpu watch_latency_p99 watch_latency_avg \
         wire_write_p50 wire_write_p99 wire_ack_p99 keepalive_qps keepalive_p99 keepalive_cpu keepalive_errors \
         h2_range_s_qps h2_range_s_cpu h2_range_s_ok h2_range_l_qps h2_range_l_cpu h2_range_l_ok \
         h2_put_qps h2_put_cpu h2_put_ok json_range_qps json_range_cpu json_range_ok \
         json_put_qps json_put_cpu json_put_ok json_put_per_sync json_put_sync_ms big_range_ms big_range_peak_mb \
         big_range_grew_mb big_range_pss_mb big_range_peak_pss_mb defrag_s defrag_db_before_mb defrag_db_after_mb \
         defrag_file_before_mb defrag_file_after_mb \
         defrag_put_before_p99 defrag_put_during_p99 \
         defrag_put_x defrag_range_before_p99 defrag_range_during_p99 defrag_range_x defrag_probe_errors \
         snapshot_s snapshot_mb snapshot_put_before_p99 snapshot_put_during_p99 snapshot_put_x \
         snapshot_range_before_p99 snapshot_range_during_p99 snapshot_range_x snapshot_probe_errors \
         h2_status failover_ms $fp_fields; do
  unit=""
  case $k in
  *_us) unit="";; *_p50|*_p99|*_avg|*_ms) unit=" (ms)";; *_cpu) unit=" (us/req)";; *_mb) unit=" (MiB)";;
  *_s) unit=" (s)";; *_x) unit=" (during/before)";;
  esac
  vals=()
  for server in "${cols[@]}"; do
    [[ $k == fp_* ]] && vals+=("${R[$server+fp.$k]:-0}") || vals+=("${R[$server.$k]:-0}")
  done
  row "$k$unit" "${vals[@]}"
done
row "fdatasync_floor (us)" "$fsync_us"
if [[ -n $tls_servers$auth_servers ]]; then
  row "with TLS / auth" "${cols[@]}"
  for k in tls_put_qps tls_put_p99 tls_put_cpu tls_range_s_qps tls_range_s_cpu tls_h2_range_s_qps tls_h2_range_s_cpu \
           tls_h2_range_s_ok tls_h2_put_qps tls_h2_put_cpu tls_h2_put_ok tls_conns_qps tls_conns_cpu \
           tls_conns_client_cpu tls_conns_ok; do
    [[ -n $tls_servers ]] || break
    vals=()
    for server in "${cols[@]}"; do vals+=("${R[$server+tls.$k]:-0}"); done
    row "$k" "${vals[@]}"
  done
  for k in put_qps put_p99 put_cpu put_client_cpu put_errors range_s_qps range_s_p99 range_s_cpu \
           range_s_client_cpu range_s_errors h2_put_qps h2_put_cpu h2_put_client_cpu h2_put_ok \
           h2_range_s_qps h2_range_s_cpu h2_range_s_client_cpu h2_range_s_ok; do
    [[ -n $auth_servers ]] || break
    vals=() plain=()
    for server in "${cols[@]}"; do
      vals+=("${R[$server+auth.auth_$k]:-0}") plain+=("${R[$server.auth_$k]:-0}")
    done
    row "auth_$k" "${vals[@]}"
    row "  without auth" "${plain[@]}"
  done
fi
[[ -s $work/scrape.err ]] &&
  echo "etcd-compare: scrapes of /metrics that failed, per server: $(sort "$work/scrape.err" | uniq -c | tr -s ' \n' ' ')" >&2
if [[ -n ${R[floor.0.p99]:-} ]]; then
  row "watch_latency_p99 (ms)," "p99" "avg"
  row "  no-work server, no lead" "${R[floor.0.p99]}" "${R[floor.0.avg]}"
  row "  no-work server, 1ms lead" "${R[floor.1ms.p99]}" "${R[floor.1ms.avg]}"
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "nan" }'; }
# over_sync_ratio MEAN SYNC: cetcd's to etcd's of each one's mean less
# its own mean WAL sync in the same run: the time each spends besides
# the disk's.
over_sync_ratio() {
  ratio "$(awk -v a="${R[cetcd.$1]:-0}" -v s="${R[cetcd.$2]:-0}" 'BEGIN { print (s > 0 ? a - s : 0) }')" \
        "$(awk -v a="${R[etcd.$1]:-0}" -v s="${R[etcd.$2]:-0}" 'BEGIN { print (s > 0 ? a - s : 0) }')"
}
echo "put_qps_ratio=$(ratio "${R[cetcd.put_qps]:-0}" "${R[etcd.put_qps]:-0}")" \
  "fp_idle_pss_ratio=$(ratio "${R[cetcd+fp.fp_idle_pss_mb]:-0}" "${R[etcd+fp.fp_idle_pss_mb]:-0}")" \
  "fp_put_pss_ratio=$(ratio "${R[cetcd+fp.fp_put_pss_mb]:-0}" "${R[etcd+fp.fp_put_pss_mb]:-0}")" \
  "put_p99_ratio=$(ratio "${R[cetcd.put_p99]:-0}" "${R[etcd.put_p99]:-0}")" \
  "cpu_per_bench_put_ratio=$(ratio "${R[cetcd.put_cpu]:-0}" "${R[etcd.put_cpu]:-0}")" \
  "range_l_qps_ratio=$(ratio "${R[cetcd.range_l_qps]:-0}" "${R[etcd.range_l_qps]:-0}")" \
  "range_s_qps_ratio=$(ratio "${R[cetcd.range_s_qps]:-0}" "${R[etcd.range_s_qps]:-0}")" \
  "txn_qps_ratio=$(ratio "${R[cetcd.txn_qps]:-0}" "${R[etcd.txn_qps]:-0}")" \
  "watch_events_qps_ratio=$(ratio "${R[cetcd.watch_events_qps]:-0}" "${R[etcd.watch_events_qps]:-0}")" \
  "watch_latency_p99_ratio=$(ratio "${R[cetcd.watch_latency_p99]:-0}" "${R[etcd.watch_latency_p99]:-0}")" \
  "nowork_watch_latency_p99_ratio=$(ratio "${R[floor.0.p99]:-0}" "${R[etcd.watch_latency_p99]:-0}")" \
  "wire_write_p99_ratio=$(ratio "${R[cetcd.wire_write_p99]:-0}" "${R[etcd.wire_write_p99]:-0}")" \
  "keepalive_qps_ratio=$(ratio "${R[cetcd.keepalive_qps]:-0}" "${R[etcd.keepalive_qps]:-0}")" \
  "cpu_per_watch_event_ratio=$(ratio "${R[cetcd.watch_cpu]:-0}" "${R[etcd.watch_cpu]:-0}")" \
  "cpu_per_keepalive_ratio=$(ratio "${R[cetcd.keepalive_cpu]:-0}" "${R[etcd.keepalive_cpu]:-0}")" \
  "cetcd_keepalive_errors=${R[cetcd.keepalive_errors]:-0}" "etcd_keepalive_errors=${R[etcd.keepalive_errors]:-0}" \
  "lat_put_avg_ratio=$(ratio "${R[cetcd.lat_put_avg_us]:-0}" "${R[etcd.lat_put_avg_us]:-0}")" \
  "lat_put_p99_ratio=$(ratio "${R[cetcd.lat_put_p99_us]:-0}" "${R[etcd.lat_put_p99_us]:-0}")" \
  "lat_range_l_avg_ratio=$(ratio "${R[cetcd.lat_range_l_avg_us]:-0}" "${R[etcd.lat_range_l_avg_us]:-0}")" \
  "lat_range_l_p99_ratio=$(ratio "${R[cetcd.lat_range_l_p99_us]:-0}" "${R[etcd.lat_range_l_p99_us]:-0}")" \
  "lat_h2_put_avg_ratio=$(ratio "${R[cetcd.lat_h2_put_avg_us]:-0}" "${R[etcd.lat_h2_put_avg_us]:-0}")" \
  "lat_h2_range_l_avg_ratio=$(ratio "${R[cetcd.lat_h2_range_l_avg_us]:-0}" "${R[etcd.lat_h2_range_l_avg_us]:-0}")" \
  "cetcd_lat_h2_put_over_fsync_us=$(awk -v a="${R[cetcd.lat_h2_put_avg_us]:-0}" -v f="$fsync_us" 'BEGIN { printf "%.0f", a - f }')" \
  "lat_put_over_sync_ratio=$(over_sync_ratio lat_put_avg_us lat_put_sync_us)" \
  "lat_h2_put_over_sync_ratio=$(over_sync_ratio lat_h2_put_avg_us lat_h2_put_sync_us)" \
  "put1_latency_ratio=$(ratio "${R[cetcd.put1_avg]:-0}" "${R[etcd.put1_avg]:-0}")" \
  "h2_range_s_qps_ratio=$(ratio "${R[cetcd.h2_range_s_qps]:-0}" "${R[etcd.h2_range_s_qps]:-0}")" \
  "h2_put_qps_ratio=$(ratio "${R[cetcd.h2_put_qps]:-0}" "${R[etcd.h2_put_qps]:-0}")" \
  "json_range_qps_ratio=$(ratio "${R[cetcd.json_range_qps]:-0}" "${R[etcd.json_range_qps]:-0}")" \
  "json_put_qps_ratio=$(ratio "${R[cetcd.json_put_qps]:-0}" "${R[etcd.json_put_qps]:-0}")" \
  "cpu_per_range_s_ratio=$(ratio "${R[cetcd.h2_range_s_cpu]:-0}" "${R[etcd.h2_range_s_cpu]:-0}")" \
  "cpu_per_put_ratio=$(ratio "${R[cetcd.h2_put_cpu]:-0}" "${R[etcd.h2_put_cpu]:-0}")" \
  "big_range_ms_ratio=$(ratio "${R[cetcd.big_range_ms]:-0}" "${R[etcd.big_range_ms]:-0}")" \
  "big_range_peak_ratio=$(ratio "${R[cetcd.big_range_peak_mb]:-0}" "${R[etcd.big_range_peak_mb]:-0}")" \
  "big_range_grew_ratio=$(ratio "${R[cetcd.big_range_grew_mb]:-0}" "${R[etcd.big_range_grew_mb]:-0}")" \
  "big_range_pss_ratio=$(ratio "${R[cetcd.big_range_pss_mb]:-0}" "${R[etcd.big_range_pss_mb]:-0}")" \
  "big_range_peak_pss_ratio=$(ratio "${R[cetcd.big_range_peak_pss_mb]:-0}" "${R[etcd.big_range_peak_pss_mb]:-0}")" \
  "failover_ratio=$(ratio "${R[cetcd.failover_ms]:-0}" "${R[etcd.failover_ms]:-0}")" \
  "defrag_s_ratio=$(ratio "${R[cetcd.defrag_s]:-0}" "${R[etcd.defrag_s]:-0}")" \
  "defrag_put_p99_ratio=$(ratio "${R[cetcd.defrag_put_during_p99]:-0}" "${R[etcd.defrag_put_during_p99]:-0}")" \
  "defrag_range_p99_ratio=$(ratio "${R[cetcd.defrag_range_during_p99]:-0}" "${R[etcd.defrag_range_during_p99]:-0}")" \
  "snapshot_s_ratio=$(ratio "${R[cetcd.snapshot_s]:-0}" "${R[etcd.snapshot_s]:-0}")" \
  "snapshot_put_p99_ratio=$(ratio "${R[cetcd.snapshot_put_during_p99]:-0}" "${R[etcd.snapshot_put_during_p99]:-0}")" \
  "tls_h2_range_s_qps_ratio=$(ratio "${R[cetcd+tls.tls_h2_range_s_qps]:-0}" "${R[etcd+tls.tls_h2_range_s_qps]:-0}")" \
  "tls_h2_put_qps_ratio=$(ratio "${R[cetcd+tls.tls_h2_put_qps]:-0}" "${R[etcd+tls.tls_h2_put_qps]:-0}")" \
  "tls_cpu_per_range_s_ratio=$(ratio "${R[cetcd+tls.tls_h2_range_s_cpu]:-0}" "${R[etcd+tls.tls_h2_range_s_cpu]:-0}")" \
  "tls_cpu_per_put_ratio=$(ratio "${R[cetcd+tls.tls_h2_put_cpu]:-0}" "${R[etcd+tls.tls_h2_put_cpu]:-0}")" \
  "tls_put_qps_ratio=$(ratio "${R[cetcd+tls.tls_put_qps]:-0}" "${R[etcd+tls.tls_put_qps]:-0}")" \
  "tls_range_s_qps_ratio=$(ratio "${R[cetcd+tls.tls_range_s_qps]:-0}" "${R[etcd+tls.tls_range_s_qps]:-0}")" \
  "tls_conns_ratio=$(ratio "${R[cetcd+tls.tls_conns_qps]:-0}" "${R[etcd+tls.tls_conns_qps]:-0}")" \
  "tls_cpu_per_conn_ratio=$(ratio "${R[cetcd+tls.tls_conns_cpu]:-0}" "${R[etcd+tls.tls_conns_cpu]:-0}")" \
  "cetcd_auth_put_ratio=$(ratio "${R[cetcd+auth.auth_put_qps]:-0}" "${R[cetcd.auth_put_qps]:-0}")" \
  "etcd_auth_put_ratio=$(ratio "${R[etcd+auth.auth_put_qps]:-0}" "${R[etcd.auth_put_qps]:-0}")" \
  "cetcd_auth_range_s_ratio=$(ratio "${R[cetcd+auth.auth_range_s_qps]:-0}" "${R[cetcd.auth_range_s_qps]:-0}")" \
  "etcd_auth_range_s_ratio=$(ratio "${R[etcd+auth.auth_range_s_qps]:-0}" "${R[etcd.auth_range_s_qps]:-0}")" \
  "cetcd_auth_h2_put_ratio=$(ratio "${R[cetcd+auth.auth_h2_put_qps]:-0}" "${R[cetcd.auth_h2_put_qps]:-0}")" \
  "etcd_auth_h2_put_ratio=$(ratio "${R[etcd+auth.auth_h2_put_qps]:-0}" "${R[etcd.auth_h2_put_qps]:-0}")" \
  "cetcd_auth_h2_range_s_ratio=$(ratio "${R[cetcd+auth.auth_h2_range_s_qps]:-0}" "${R[cetcd.auth_h2_range_s_qps]:-0}")" \
  "etcd_auth_h2_range_s_ratio=$(ratio "${R[etcd+auth.auth_h2_range_s_qps]:-0}" "${R[etcd.auth_h2_range_s_qps]:-0}")" \
  "cetcd_auth_h2_put_cpu_ratio=$(ratio "${R[cetcd+auth.auth_h2_put_cpu]:-0}" "${R[cetcd.auth_h2_put_cpu]:-0}")" \
  "cetcd_auth_h2_range_s_cpu_ratio=$(ratio "${R[cetcd+auth.auth_h2_range_s_cpu]:-0}" "${R[cetcd.auth_h2_range_s_cpu]:-0}")" \
  "members=$members"
