#!/usr/bin/env bash
# The cetcd launcher and the daemons, as real processes on loopback:
# start, attach through the slot rings, the client port's answers (/health
# and /version over HTTP/1.1, the HTTP/2 server preface, Maintenance.Status
# and Cluster.MemberList through etcdctl when it is installed), the plain
# peer port's /version, idle without spinning, restart of a killed
# gatewayd with a higher slot generation, ordered stop on SIGTERM, no
# survivors and nothing left in the runtime dir after SIGKILL of the
# launcher, a second launcher on the same data dir refused, the client
# port taking connections as soon as a ready line is out, flag handling
# (--version, unsupported values, unknown flags) and
# the daemons' refusal of a missing region or one of another layout.
set -euo pipefail

: "${CETCD_BIN:?CETCD_BIN must name the directory of the built programs}"
for p in cetcd raftd stored gatewayd; do
	if [[ ! -x $CETCD_BIN/$p ]]; then
		echo "SKIP: $CETCD_BIN/$p is not built"
		exit 77
	fi
done
if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 is needed to probe ports"
	exit 77
fi
if [[ ! -d /dev/shm || ! -w /dev/shm ]]; then
	echo "SKIP: /dev/shm is not writable"
	exit 77
fi

tmp=$(mktemp -d /tmp/cetcd-launcher-test.XXXXXX)
rtdir=$(mktemp -d /dev/shm/cetcd-launcher-test.XXXXXX)
pids_to_kill=()

cleanup() {
	local p
	# only processes still running this test's member (pids get reused)
	for p in "${pids_to_kill[@]}"; do
		if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qF -- "$rtdir"; then
			kill -9 "$p" 2>/dev/null || true
		fi
	done
	rm -rf "$tmp" "$rtdir"
}
trap cleanup EXIT

failures=0
checks=0
ok() { checks=$((checks + 1)); echo "ok   - $*"; }
fail() {
	checks=$((checks + 1))
	failures=$((failures + 1))
	echo "FAIL - $*"
}
check() { # check "description" command...
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}
now_ms() { date +%s%3N; }

# Two free loopback ports (never etcd's 2379/2380).
read -r cport pport < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
)

args=(--name t1 --data-dir "$tmp/data" --runtime-dir "$rtdir" --gateways 2
	--listen-client-urls "http://127.0.0.1:$cport"
	--advertise-client-urls "http://127.0.0.1:$cport"
	--listen-peer-urls "http://127.0.0.1:$pport"
	--initial-advertise-peer-urls "http://127.0.0.1:$pport")

# Lines of log $1 matching the extended regex $2.
count() { grep -cE -- "$2" "$1" 2>/dev/null || true; }

# Waits up to $3 seconds until log $1 has at least $4 (default 1) lines
# matching $2.
wait_log() {
	local file=$1 re=$2 secs=$3 want=${4:-1}
	local deadline=$(($(now_ms) + secs * 1000))
	while (($(now_ms) < deadline)); do
		if (($(count "$file" "$re") >= want)); then
			return 0
		fi
		sleep 0.05
	done
	echo "  (waited ${secs}s for $want line(s) matching $re in $file)"
	return 1
}

# Whether a process is gone (or a zombie nobody reaped yet).
gone() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	[[ -z $st || $st == Z* ]]
}

# Waits up to $2 ms for process $1 to be gone.
wait_gone() {
	local deadline=$(($(now_ms) + $2))
	while (($(now_ms) < deadline)); do
		gone "$1" && return 0
		sleep 0.02
	done
	return 1
}

# Whether both ports can be bound again (as the daemons bind them).
ports_free() {
	python3 - "$cport" "$pport" <<'EOF'
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(p)))
        s.listen()
    except OSError as e:
        print("  port", p, "still taken:", e)
        sys.exit(1)
    finally:
        s.close()
EOF
}

# Sends the bytes of file $2 to port $1 and writes all of the answer, up to
# the server's close, to file $3.
talk() {
	python3 - "$@" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
with open(sys.argv[2], "rb") as f:
    s.sendall(f.read())
data = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
with open(sys.argv[3], "wb") as f:
    f.write(data)
EOF
}

# Every line of a launcher log is one JSON object with level, ts, caller, msg.
all_json() {
	python3 - "$1" <<'EOF'
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(line)
    for k in ("level", "ts", "caller", "msg"):
        if k not in o:
            print("  line without", k, ":", line.strip())
            sys.exit(1)
    n += 1
sys.exit(0 if n > 0 else 1)
EOF
}

# The slot and generation a gatewayd logged when it claimed its slot, as
# "slot gen", for the $3-th claim (1-based) in log $1 by logger $2.
claim_of() {
	grep -E "\"logger\":\"$2\".*\"msg\":\"claimed a gateway slot\"" "$1" | sed -n "${3}p" |
		sed -E 's/.*"slot":([0-9]+),"generation":([0-9]+).*/\1 \2/'
}

# Waits until every daemon and both gateways attached through the rings.
wait_attached() {
	local log=$1 want=${2:-2}
	wait_log "$log" '"logger":"gatewayd-[0-9]+".*"msg":"attached","peer":"raftd"' 10 "$want" &&
		wait_log "$log" '"logger":"gatewayd-[0-9]+".*"msg":"attached","peer":"stored"' 10 "$want" &&
		wait_log "$log" '"logger":"raftd".*"msg":"attached","peer":"gatewayd"' 10 "$want" &&
		wait_log "$log" '"logger":"stored".*"msg":"attached","peer":"gatewayd"' 10 "$want"
}

# CPU ticks (user + system) used so far by the given processes.
cpu_ticks() {
	local p t=0
	for p in "$@"; do
		read -r -a f <"/proc/$p/stat"
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}

# ---------------------------------------------------------------- flags
out=$("$CETCD_BIN/cetcd" --version)
check "--version exits 0 and names cetcd's version and etcd API 3.4" \
	grep -q '^etcd API Version: 3.4$' <<<"$out"
check "--version prints the cetcd version line" grep -q '^cetcd Version: ' <<<"$out"
check "raftd --version works too" "$CETCD_BIN/raftd" --version >/dev/null

set +e
"$CETCD_BIN/cetcd" "${args[@]}" --proxy=on 2>"$tmp/unsup.err"
st=$?
ETCD_PROXY=readonly "$CETCD_BIN/cetcd" "${args[@]}" 2>"$tmp/unsup-env.err"
st_env=$?
"$CETCD_BIN/cetcd" "${args[@]}" --no-such-flag 2>"$tmp/unknown.err"
st_unknown=$?
"$CETCD_BIN/gatewayd" "${args[@]}" --discovery-proxy=http://127.0.0.1:1 2>"$tmp/unsup-gw.err"
st_gw=$?
set -e
check "an unsupported non-default flag exits 2" test "$st" -eq 2
check "and its message names the flag" grep -q -- '--proxy=on is not supported' "$tmp/unsup.err"
check "an unsupported ETCD_ variable exits 2" test "$st_env" -eq 2
check "and its message names the flag" grep -q -- '--proxy=readonly is not supported' "$tmp/unsup-env.err"
check "an unknown flag exits 2 as etcd's flag parsing does" test "$st_unknown" -eq 2
check "and says which" grep -q 'flag provided but not defined: -no-such-flag' "$tmp/unknown.err"
check "daemons refuse unsupported values the same way" test "$st_gw" -eq 2
check "nothing was started by refused invocations" test ! -e "$rtdir/region"

# ------------------------------------------------- start, attach, refuse
"$CETCD_BIN/cetcd" "${args[@]}" 2>"$tmp/run1.log" &
lp=$!
pids_to_kill+=("$lp")
check "launcher, raftd, stored and both gateways attach through the slot rings" wait_attached "$tmp/run1.log"
check "data dir has member/ with mode 0700" test "$(stat -c %a "$tmp/data/member")" = 700
check "data dir has mode 0700" test "$(stat -c %a "$tmp/data")" = 700
check "the region has no name: the runtime dir holds nothing" test -z "$(ls -A "$rtdir")"
set +e
"$CETCD_BIN/cetcd" "${args[@]}" 2>"$tmp/second.log"
st=$?
set -e
check "a second launcher on the same data dir exits 1" test "$st" -eq 1
check "saying another launcher runs for this member" \
	grep -q 'another cetcd launcher, or a process it started, is still running for this member' "$tmp/second.log"
mapfile -t kids < <(pgrep -P "$lp")
pids_to_kill+=("${kids[@]}")
check "the launcher runs 4 processes (raftd, stored, 2 gatewayd)" test "${#kids[@]}" -eq 4

printf 'GET /health HTTP/1.1\r\nHost: test\r\n\r\nGET /version HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n' >"$tmp/http.req"
# /health is 503 {"health":"false"} until raftd knows a leader, then 200
# {"health":"true"}, as etcd 3.4 answers; a single member elects itself
healthy() {
	talk "$cport" "$tmp/http.req" "$tmp/http.resp" || return 1
	grep -q '^HTTP/1.1 200 OK' "$tmp/http.resp" && grep -qF '{"health":"true"}' "$tmp/http.resp"
}
wait_healthy() {
	local deadline=$(($(now_ms) + 10000))
	while (($(now_ms) < deadline)); do
		healthy && return 0
		if [[ -s $tmp/http.resp ]] && ! grep -qF '{"health":"false"}' "$tmp/http.resp"; then
			echo "  /health answered neither true nor false:"
			sed 's/^/    /' "$tmp/http.resp"
			return 1
		fi
		sleep 0.05
	done
	return 1
}
check "/health answers 200 {\"health\":\"true\"} once a leader is known (keep-alive)" wait_healthy
check "/version answers the etcd versions on the same connection" \
	grep -qF '{"etcdserver":"3.4.23","etcdcluster":"3.4.0"}' "$tmp/http.resp"
# an HTTP/2 client preface gets the server's SETTINGS frame (gRPC served)
check "an HTTP/2 preface gets the server's SETTINGS" python3 - "$cport" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
data = b""
while len(data) < 9:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
sys.exit(0 if len(data) >= 9 and data[3] == 4 and data[4] == 0 else 1)
EOF
if command -v etcdctl >/dev/null; then
	ml=$(ETCDCTL_API=3 timeout 10 etcdctl --endpoints "127.0.0.1:$cport" member list -w json 2>&1 || true)
	check "etcdctl member list names this member with its URLs" \
		grep -qF "\"name\":\"t1\",\"peerURLs\":[\"http://127.0.0.1:$pport\"],\"clientURLs\":[\"http://127.0.0.1:$cport\"]" <<<"$ml"
	es=$(ETCDCTL_API=3 timeout 10 etcdctl --endpoints "127.0.0.1:$cport" endpoint status -w json 2>&1 || true)
	mid=$(grep -oE '"member_id":[0-9]+' <<<"$es" | head -1 | cut -d: -f2)
	check "etcdctl endpoint status answers: version 3.4.23, this member leads" \
		grep -qE "\"version\":\"3.4.23\",\"dbSize\":[0-9]+,\"leader\":${mid:-none}," <<<"$es"
else
	echo "  (etcdctl is not installed: the gRPC checks are skipped)"
fi
talk "$pport" "$tmp/http.req" "$tmp/peer.resp" || true
check "the peer port answers etcd's /version (server and cluster version)" \
	grep -q '{"etcdserver":"3.4.23","etcdcluster":"3.4.0"}' "$tmp/peer.resp"

t0=$(cpu_ticks "$lp" "${kids[@]}")
sleep 2
t1=$(cpu_ticks "$lp" "${kids[@]}")
echo "  idle CPU over 2 s, 5 processes: $((t1 - t0)) ticks"
check "idle processes sleep (<= 10 CPU ticks in 2 s for all five)" test $((t1 - t0)) -le 10

# -------------------------------------------- a killed gateway comes back
read -r old_slot old_gen < <(claim_of "$tmp/run1.log" gatewayd-0 1)
gw0=$(pgrep -P "$lp" -f -- '--gateway-index=0')
kill -9 "$gw0"
check "the launcher logs the killed gateway and restarts it" \
	wait_log "$tmp/run1.log" '"msg":"restarting process","process":"gatewayd-0"' 5
check "the new gatewayd-0 claims a slot" \
	wait_log "$tmp/run1.log" '"logger":"gatewayd-0".*"msg":"claimed a gateway slot"' 10 2
read -r new_slot new_gen < <(claim_of "$tmp/run1.log" gatewayd-0 2)
echo "  gatewayd-0: slot $old_slot generation $old_gen -> slot $new_slot generation $new_gen"
check "it reclaims the freed slot with a higher generation" \
	test "$new_slot" -eq "$old_slot" -a "$new_gen" -gt "$old_gen"
check "and reattaches to raftd and stored at that generation" \
	wait_log "$tmp/run1.log" "\"logger\":\"gatewayd-0\".*\"msg\":\"attached\".*\"slot\":$new_slot,\"generation\":$new_gen" 10 2
check "raftd answers the new generation" \
	wait_log "$tmp/run1.log" "\"logger\":\"raftd\".*\"msg\":\"attached\".*\"slot\":$new_slot,\"generation\":$new_gen" 10
mapfile -t kids < <(pgrep -P "$lp")
pids_to_kill+=("${kids[@]}")

# ---------------------------------------------------- SIGTERM stops all
t0=$(now_ms)
kill -TERM "$lp"
wait_gone "$lp" 5000 || true
set +e
wait "$lp"
st=$?
set -e
el=$(($(now_ms) - t0))
echo "  SIGTERM to exit: ${el} ms"
check "SIGTERM stops the member within 5 s" test "$el" -le 5000
check "and the launcher exits 0" test "$st" -eq 0
alive=0
for p in "${kids[@]}"; do gone "$p" || alive=$((alive + 1)); done
check "no process of the member is left" test "$alive" -eq 0
check "gateways stop before stored, stored before raftd" python3 - "$tmp/run1.log" <<'EOF'
import json, sys
order = [json.loads(l).get("process") for l in open(sys.argv[1])
         if '"msg":"process exited"' in l and '"exit-code":0' in l]
order = order[-4:]
ok = set(order[:2]) == {"gatewayd-0", "gatewayd-1"} and order[2:] == ["stored", "raftd"]
sys.exit(0 if ok else 1)
EOF
check "the ports are free again" ports_free
check "every log line is a JSON object (level, ts, caller, msg)" all_json "$tmp/run1.log"

# ------------------------------------- SIGKILL of the launcher, restart
"$CETCD_BIN/cetcd" "${args[@]}" 2>"$tmp/run2.log" &
lp=$!
pids_to_kill+=("$lp")
check "a second start on the same dirs attaches again" wait_attached "$tmp/run2.log"
mapfile -t kids < <(pgrep -P "$lp")
pids_to_kill+=("${kids[@]}")
t0=$(now_ms)
kill -9 "$lp"
wait "$lp" 2>/dev/null || true
alive=0
for p in "${kids[@]}"; do wait_gone "$p" 2000 || alive=$((alive + 1)); done
el=$(($(now_ms) - t0))
echo "  SIGKILL of the launcher to no survivors: ${el} ms"
check "after SIGKILL of the launcher no process of it survives (2 s)" test "$alive" -eq 0
check "the ports are free after the SIGKILL" ports_free
check "nothing of the killed member is left in the runtime dir" test -z "$(ls -A "$rtdir")"

# with etcd's initial corruption check: one member has no peer to differ
# from, so it passes before anything is served, as etcd's does
"$CETCD_BIN/cetcd" "${args[@]}" --experimental-initial-corrupt-check 2>"$tmp/run3.log" &
lp=$!
pids_to_kill+=("$lp")
check "a restart on the same data dir works" wait_attached "$tmp/run3.log"
check "--experimental-initial-corrupt-check is accepted and passes on one member, with etcd's lines" \
	python3 - "$tmp/run3.log" <<'EOF'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
start = [m for m in msgs if m.get("msg") == "starting initial corruption check"]
done = [m for m in msgs if m.get("msg") == "initial corruption checking passed; no corruption"]
ready = [i for i, m in enumerate(msgs) if m.get("msg") == "ready to serve client requests"]
ok = (len(start) == 1 and len(done) == 1 and start[0].get("timeout") == "7s"
      and start[0].get("local-member-id") == done[0].get("local-member-id")
      and len(start[0].get("local-member-id", "")) > 0
      and ready and msgs.index(done[0]) < ready[0])
sys.exit(0 if ok else 1)
EOF
kill -TERM "$lp"
set +e
wait "$lp"
st=$?
set -e
check "and it stops with exit 0" test "$st" -eq 0

# ------------- a taken peer port: raftd cannot run, the member stops (exit 1)
# SO_REUSEADDR as raftd's own listener: the earlier runs' connections to
# the port may still be in TIME_WAIT, which a plain bind refuses.
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("ready", flush=True)
time.sleep(30)
' "$pport" >"$tmp/holder.out" 2>"$tmp/holder.err" &
holder=$!
check "a listener of the test's takes the peer port" wait_log "$tmp/holder.out" ready 5
"$CETCD_BIN/cetcd" "${args[@]}" 2>"$tmp/taken.log" &
lp=$!
pids_to_kill+=("$lp")
# a member that does stop (the check below fails) is killed, not waited for
wait_gone "$lp" 10000 || kill -9 "$lp" 2>/dev/null || true
set +e
wait "$lp"
st=$?
set -e
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
check "a daemon that cannot bind its address stops the member with exit 1" test "$st" -eq 1
check "saying which process and why" \
	grep -q '"msg":"process cannot run with this configuration; stopping the member","process":"raftd","exit-code":78' "$tmp/taken.log"
check "with the address in the error" grep -q "listen tcp 127.0.0.1:$pport: bind: Address already in use" "$tmp/taken.log"

# ---------------------------------------- daemons on their own: no region
set +e
"$CETCD_BIN/stored" "${args[@]}" 2>"$tmp/noregion.err"
st=$?
set -e
check "a daemon without a region exits 78" test "$st" -eq 78
check "and says to start the launcher first" grep -q 'no member region; start the cetcd launcher' "$tmp/noregion.err"

# ------------------- as under systemd: --prepare-only, then each daemon alone,
# configured only through ETCD_ variables (as the units do)
env_cfg=(ETCD_NAME=t1 "ETCD_DATA_DIR=$tmp/data" "ETCD_RUNTIME_DIR=$rtdir" ETCD_GATEWAYS=2
	"ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:$cport"
	"ETCD_ADVERTISE_CLIENT_URLS=http://127.0.0.1:$cport"
	"ETCD_LISTEN_PEER_URLS=http://127.0.0.1:$pport"
	"ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:$pport")
env "${env_cfg[@]}" "$CETCD_BIN/cetcd" --prepare-only 2>"$tmp/prepare.log"
check "--prepare-only creates the region and exits 0" test -f "$rtdir/region"
check "and starts nothing" test "$(count "$tmp/prepare.log" '"msg":"started process"')" -eq 0
env "${env_cfg[@]}" "$CETCD_BIN/raftd" 2>"$tmp/alone.log" &
d1=$!
env "${env_cfg[@]}" "$CETCD_BIN/stored" 2>>"$tmp/alone.log" &
d2=$!
env "${env_cfg[@]}" "$CETCD_BIN/gatewayd" --gateway-index=0 2>>"$tmp/alone.log" &
d3=$!
pids_to_kill+=("$d1" "$d2" "$d3")
check "daemons started on their own attach and exchange hellos" wait_attached "$tmp/alone.log" 1
check "and take their configuration from ETCD_ variables" \
	grep -q '"msg":"recognized and used environment variable","variable-name":"ETCD_LISTEN_PEER_URLS"' "$tmp/alone.log"
kill -TERM "$d3" "$d2" "$d1"
st_alone=0
for p in "$d3" "$d2" "$d1"; do
	set +e
	wait "$p"
	st=$?
	set -e
	st_alone=$((st_alone + st))
done
check "each exits 0 on SIGTERM" test "$st_alone" -eq 0

# --------------------------- the client port takes connections when ready
# etcd binds its client port before it starts the server, so a client that
# connects once a ready line is out (etcd's e2e tests wait for "enabled
# capabilities for version" or "published") is never refused. raftd prints
# the first as soon as it leads, before gatewayd has the member's ids: the
# launcher binds gatewayd 0's listeners before it starts any process.
refused=$(python3 - "$CETCD_BIN/cetcd" "$tmp" "$cport" "$pport" <<'EOF'
import os, shutil, socket, subprocess, sys, tempfile
cetcd, tmp, cport, pport = sys.argv[1:]
refused = 0
for i in range(10):
    data = os.path.join(tmp, "ready%d" % i)
    rt = tempfile.mkdtemp(prefix="cetcd-launcher-ready.", dir="/dev/shm")
    url_c, url_p = "http://127.0.0.1:" + cport, "http://127.0.0.1:" + pport
    p = subprocess.Popen([cetcd, "--name", "r", "--data-dir", data, "--runtime-dir", rt,
                          "--listen-client-urls", url_c, "--advertise-client-urls", url_c,
                          "--listen-peer-urls", url_p, "--initial-advertise-peer-urls", url_p],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if "enabled capabilities for version" in line or '"msg":"published' in line:
                s = socket.socket()
                try:
                    s.connect(("127.0.0.1", int(cport)))
                except OSError:
                    refused += 1
                s.close()
                break
        else:
            refused += 1  # no ready line at all
    finally:
        p.terminate()
        p.wait(timeout=30)
        shutil.rmtree(rt, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
print(refused)
EOF
)
check "gatewayd 0 took the client listeners the launcher bound" \
	grep -q '"logger":"gatewayd-0".*"msg":"took the client listeners the launcher bound"' "$tmp/run1.log"
check "a connection right after the ready line is taken, in 10 starts (refused: $refused)" test "$refused" = 0

# --------------------------------------- a region of another layout version
python3 - "$rtdir/region" <<'EOF'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(8)  # after the 8-byte magic: the layout version
    f.write(struct.pack("<I", 999))
EOF
set +e
"$CETCD_BIN/raftd" "${args[@]}" 2>"$tmp/version.err"
st=$?
set -e
check "a daemon refuses a region of another layout version (exit 78)" test "$st" -eq 78
check "with a clear message" grep -q 'refusing to attach to the member region: it was made by another cetcd version' "$tmp/version.err"
check "naming the version it found" grep -q '999' "$tmp/version.err"
sed 's/^/  /' "$tmp/version.err"

echo "$checks checks, $failures failed"
((failures == 0))
