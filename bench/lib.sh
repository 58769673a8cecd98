# What the benchmark scripts share; each sources it after its `set -euo
# pipefail`. Nothing here runs on its own.

# bench_lock WHO: one run at a time on a machine: waits for the run that
# holds BENCH_LOCK (default /tmp/cetcd-bench.lock, ${TMPDIR} if set),
# then holds it on fd 8 until the script ends.
bench_lock() {
  local lock=${BENCH_LOCK:-${TMPDIR:-/tmp}/cetcd-bench.lock}
  exec 8>"$lock"
  flock 8 || { echo "$1: cannot lock $lock" >&2; exit 2; }
}

# build_go OUT SRC: the Go program at SRC (one .go file, or a folder of
# them) built into OUT over Debian's Go packages, unless OUT is newer
# than all of SRC; the build cache beside OUT.
build_go() {
  local out=$1 from=$2 dir=$2 what=.
  if [[ -f $from ]]; then dir=$(dirname "$from") what=$(basename "$from"); fi
  [[ -x $out && -z $(find "$from" -newer "$out") ]] && return 0
  mkdir -p "$(dirname "$out")"
  echo "building $out" >&2
  (cd "$dir" && GO111MODULE=off GOFLAGS='' GOPATH=/usr/share/gocode \
    GOCACHE="$(dirname "$out")/gocache" go build -o "$out.tmp" "$what") && mv "$out.tmp" "$out"
}

# free_port: a TCP port of 127.0.0.1 free now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# member_args DIR CPORT PPORT: the flags of a member alone, m0, on
# 127.0.0.1 (plain http), its data in DIR, logging errors only.
member_args() {
  echo "--name m0 --data-dir $1 --log-level error
    --listen-client-urls http://127.0.0.1:$2 --advertise-client-urls http://127.0.0.1:$2
    --listen-peer-urls http://127.0.0.1:$3 --initial-advertise-peer-urls http://127.0.0.1:$3
    --initial-cluster m0=http://127.0.0.1:$3"
}

# put_ready EP [ETCDCTL FLAGS...]: a put through EP is acknowledged
# within a second.
put_ready() {
  ETCDCTL_API=3 etcdctl --endpoints "$1" --command-timeout 1s "${@:2}" put bench-ready 1 \
    >/dev/null 2>&1
}

# wait_ready EP TRIES: put_ready, tried every 0.1 s up to TRIES times.
wait_ready() {
  local i
  for ((i = 0; i < $2; i++)); do
    put_ready "$1" && return 0
    sleep 0.1
  done
  return 1
}

# stop_pid PID [TENTHS]: PID (started with setsid: its group's leader)
# asked to stop (TERM), given TENTHS tenths of a second (50), then killed
# with its group; reaped.
stop_pid() {
  local p=$1 i
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < ${2:-50}; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
  fi
  wait "$p" 2>/dev/null || true
}

# median: the median of the numbers on stdin (0 for none).
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : 0) }'; }
