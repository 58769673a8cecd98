#!/usr/bin/env bash
# Hostile clients on the peer port, and a member out of descriptors.
# - idle: clients that send only HTTP/2's preface, or only the head of
#   GET /members/hashkv with a Content-Length and no body, then stay
#   silent. raftd hands both to a gatewayd; both are closed after etcd's
#   5 s (rafthttp's ConnReadTimeout on its peer listener; etcd 3.4 closes
#   them at 5 to 10 s), none before 4 s, and the descriptors they took in
#   raftd and in gatewayd (/proc/PID/fd) are given back. A client that
#   trickles a head one byte a second is closed as well.
# - descriptors: a member started with `ulimit -n 256`, and more silent
#   connections kept open on its peer and client ports than that (closed
#   ones are opened again). raftd and gatewayd do not spin on their
#   listeners: their CPU time over 6 s stays under a quarter of a core,
#   and they write at most a few lines about failed accepts. Once the
#   connections are gone, the peer port and the client port answer again.
# Exits 77 when the programs, curl, python3 or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program python3
it_init peer-hostile

# hostile.py MODE PORT N PAYLOAD [SECS]: N connections to PORT, each
# sending PAYLOAD (preface, hashkv, trickle or none) once it is up.
#   idle: prints "open N" once all are up, then for each connection the
#         seconds after its payload when the server closed it ("closed
#         T"); "open-left K" after SECS for those still open.
#   keep: keeps N open for SECS, opening a new one for each the server
#         closes; prints "up K" each second (K connected now).
cat >"$IT_TMP/hostile.py" <<'EOF'
import resource, selectors, socket, sys, time
mode, port, n, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
secs = float(sys.argv[5]) if len(sys.argv) > 5 else 20
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * n + 64)), hard))
payloads = {
    "preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "hashkv": b"GET /members/hashkv HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
    "trickle": b"GET /version HTTP/1.1\r\nX-Slow: ",
    "none": b"",
}
payload = payloads[kind]
sel = selectors.DefaultSelector()
state = {}  # socket -> [connected, sent_at]

def dial():
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    state[s] = [False, None]
    sel.register(s, selectors.EVENT_WRITE)

def drop(s):
    sel.unregister(s)
    del state[s]
    s.close()

for _ in range(n):
    dial()
start = time.time()
last_tick = start
told_open = False
closed = 0
while time.time() - start < secs:
    for key, ev in sel.select(0.2):
        s = key.fileobj
        st = state[s]
        if not st[0]:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                drop(s)
                if mode == "keep":
                    dial()
                continue
            st[0] = True
            try:
                s.sendall(payload)
            except OSError:
                pass
            st[1] = time.time()
            sel.modify(s, selectors.EVENT_READ)
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if data:
            continue
        if mode == "idle":
            print("closed %.2f" % (time.time() - st[1]), flush=True)
            closed += 1
        drop(s)
        if mode == "keep":
            dial()
    now = time.time()
    if mode == "idle" and not told_open and sum(1 for v in state.values() if v[0]) + closed == n:
        told_open = True
        print("open %d" % n, flush=True)
    if now - last_tick >= 1:
        last_tick = now
        if mode == "keep":
            print("up %d" % sum(1 for v in state.values() if v[0]), flush=True)
        elif kind == "trickle":
            for s, v in list(state.items()):
                if v[0]:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass
if mode == "idle":
    print("open-left %d" % sum(1 for v in state.values() if v[0]), flush=True)
EOF

fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# cpu_ticks PID: utime + stime of the process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
closed_count() { grep -c '^closed' "$1" 2>/dev/null || true; }
# fds_back PID MAX: the process holds at most MAX descriptors.
fds_back() { (($(fds "$1") <= $2)); }
# fds_held PID MIN: the process holds at least MIN descriptors.
fds_held() { (($(fds "$1") >= $2)); }

# ------------------------------------------------------------ idle
it_cetcd_start idle "$IT_TMP/idle" "$IT_TMP/idle.log" --gateways 1
it_wait_healthy "$IT_CPORT"
peer=http://127.0.0.1:$IT_PPORT
raftd=$(it_cetcd_child raftd)
gw=$(it_cetcd_child gatewayd-0)
base_r=$(fds "$raftd") base_g=$(fds "$gw")
echo "  descriptors before: raftd $base_r, gatewayd $base_g"

# the clients stay (60 s) until the descriptors are counted
n=60 idlers=()
python3 "$IT_TMP/hostile.py" idle "$IT_PPORT" "$n" preface 60 >"$IT_TMP/preface.out" 2>&1 &
idlers+=($!)
python3 "$IT_TMP/hostile.py" idle "$IT_PPORT" "$n" hashkv 60 >"$IT_TMP/hashkv.out" 2>&1 &
idlers+=($!)
python3 "$IT_TMP/hostile.py" idle "$IT_PPORT" 5 trickle 60 >"$IT_TMP/trickle.out" 2>&1 &
idlers+=($!)
for p in "${idlers[@]}"; do it_track "$p"; done
it_until 10000 grep -q '^open' "$IT_TMP/preface.out" || true
it_until 10000 grep -q '^open' "$IT_TMP/hashkv.out" || true
# both daemons hold them: raftd two descriptors a relay, gatewayd one
it_until 3000 fds_held "$gw" $((base_g + 2 * n)) || true
held_r=$(fds "$raftd") held_g=$(fds "$gw")
echo "  descriptors while held: raftd $held_r, gatewayd $held_g"
check "raftd relayed the idle connections to gatewayd ($held_r, $held_g descriptors)" \
	test "$held_r" -ge $((base_r + 3 * n)) -a "$held_g" -ge $((base_g + 2 * n))
it_until 16000 bash -c "[ \$(grep -c '^closed' '$IT_TMP/preface.out') -ge $n ] &&
	[ \$(grep -c '^closed' '$IT_TMP/hashkv.out') -ge $n ] &&
	[ \$(grep -c '^closed' '$IT_TMP/trickle.out') -ge 5 ]" || true
for kind in preface hashkv trickle; do
	want=$n
	[[ $kind == trickle ]] && want=5
	times=$(awk '/^closed/ { print $2 }' "$IT_TMP/$kind.out" | sort -n | sed -n '1p;$p' | tr '\n' ' ')
	echo "  $kind: $(closed_count "$IT_TMP/$kind.out") of $want closed, first and last after: ${times:-none} s"
	check "every $kind-only connection was closed by the member" \
		[ "$(closed_count "$IT_TMP/$kind.out")" -ge "$want" ]
	check "none of them before 4 s, all by 12 s ($times)" \
		awk '/^closed/ { if ($2 < 4 || $2 > 12) bad = 1 } END { exit bad }' "$IT_TMP/$kind.out"
done
it_until 5000 fds_back "$raftd" $((base_r + 5)) || true
it_until 5000 fds_back "$gw" $((base_g + 5)) || true
check "raftd gave its descriptors back (now $(fds "$raftd"), before $base_r)" \
	fds_back "$raftd" $((base_r + 5))
check "gatewayd gave its descriptors back (now $(fds "$gw"), before $base_g)" \
	fds_back "$gw" $((base_g + 5))
kill "${idlers[@]}" 2>/dev/null || true
check "the peer port still answers /version" curl -sf --max-time 5 -o /dev/null "$peer/version"
check "gRPC through the peer URL still works" \
	etcdctl --dial-timeout 3s --command-timeout 10s --endpoints "$peer" put k1 v1
check "no failures logged" bash -c "! grep -q '\"level\":\"\\(error\\|fatal\\)\"' '$IT_TMP/idle.log'"
it_cetcd_stop || true

# ------------------------------------------------------------ descriptors
# The launcher (and so every daemon) under a limit of 256 descriptors:
# the launcher finds its daemons beside /proc/self/exe, not through PATH.
limit=256
mkdir "$IT_TMP/lowfd"
cat >"$IT_TMP/lowfd/cetcd" <<EOF
#!/bin/sh
ulimit -n $limit && exec "$IT_BIN/cetcd" "\$@"
EOF
chmod +x "$IT_TMP/lowfd/cetcd"
unset IT_CPORT
real_bin=$IT_BIN
IT_BIN=$IT_TMP/lowfd
it_cetcd_start lowfd "$IT_TMP/lowfd-data" "$IT_TMP/lowfd.log" --gateways 1
IT_BIN=$real_bin
it_wait_healthy "$IT_CPORT"
raftd=$(it_cetcd_child raftd)
gw=$(it_cetcd_child gatewayd-0)
check "raftd runs under the limit" grep -q "^Max open files *$limit " "/proc/$raftd/limits"
n=$((2 * limit))
python3 "$IT_TMP/hostile.py" keep "$IT_PPORT" "$n" preface 14 >"$IT_TMP/keep-peer.out" 2>&1 &
keep_peer=$!
it_track "$keep_peer"
python3 "$IT_TMP/hostile.py" keep "$IT_CPORT" "$n" none 14 >"$IT_TMP/keep-client.out" 2>&1 &
keep_client=$!
it_track "$keep_client"
# until both daemons are out of descriptors
it_until 8000 eval 'fds_held "$raftd" $((limit - 8)) && fds_held "$gw" $((limit - 8))' || true
echo "  descriptors: raftd $(fds "$raftd"), gatewayd $(fds "$gw") of $limit"
r0=$(cpu_ticks "$raftd") g0=$(cpu_ticks "$gw") t0=$(it_now_ms)
sleep 6
r1=$(cpu_ticks "$raftd") g1=$(cpu_ticks "$gw") t1=$(it_now_ms)
hz=$(getconf CLK_TCK)
r_ms=$(((r1 - r0) * 1000 / hz)) g_ms=$(((g1 - g0) * 1000 / hz)) span=$((t1 - t0))
echo "  CPU over $span ms out of descriptors: raftd $r_ms ms, gatewayd $g_ms ms"
check "raftd out of descriptors used under a quarter of a core ($r_ms ms in $span ms)" \
	[ $((r_ms * 4)) -lt "$span" ]
check "gatewayd out of descriptors used under a quarter of a core ($g_ms ms in $span ms)" \
	[ $((g_ms * 4)) -lt "$span" ]
wait "$keep_peer" "$keep_client" 2>/dev/null || true
echo "  peer port: $(tail -n 1 "$IT_TMP/keep-peer.out"), client port: $(tail -n 1 "$IT_TMP/keep-client.out") (connected at the end)"
r_lines=$(it_count "$IT_TMP/lowfd.log" '"logger":"raftd".*cannot (accept|hand)')
g_lines=$(it_count "$IT_TMP/lowfd.log" '"logger":"gatewayd-0".*cannot accept')
echo "  lines about failed accepts: raftd $r_lines, gatewayd $g_lines; log $(wc -l <"$IT_TMP/lowfd.log") lines"
check "raftd ran out of descriptors and said so ($r_lines lines)" [ "$r_lines" -ge 1 ]
check "gatewayd ran out of descriptors and said so ($g_lines lines)" [ "$g_lines" -ge 1 ]
check "raftd wrote at most 10 lines about failed accepts ($r_lines)" [ "$r_lines" -le 10 ]
check "gatewayd wrote at most 10 lines about failed accepts ($g_lines)" [ "$g_lines" -le 10 ]
check "the peer port answers /version once the connections are gone" \
	it_until 15000 curl -sf --max-time 2 -o /dev/null "http://127.0.0.1:$IT_PPORT/version"
check "the client port serves gRPC once the connections are gone" it_wait_healthy "$IT_CPORT" 30
check "gRPC through the peer URL works again" it_until 15000 \
	etcdctl --dial-timeout 2s --command-timeout 5s --endpoints "http://127.0.0.1:$IT_PPORT" put k2 v2
check "the member's daemons are the ones it started with" \
	test "$(it_cetcd_child raftd)" = "$raftd" -a "$(it_cetcd_child gatewayd-0)" = "$gw"
it_cetcd_stop || true
it_summary
