#!/usr/bin/env bash
# stored installs a db that etcd wrote, as a follower of an etcd leader
# receives it: Debian's etcd takes puts, overwrites and deletes under
# etcd/, `etcdctl snapshot save` copies its db (the trailing SHA-256 is
# cut off: raftd receives the bare db), and stored/test_install's etcd
# phase hands it to a running stored in MSG_SNAPSHOT_INSTALL at its
# consistent index. stored must check it, build cetcd's index for it, and
# publish exactly etcd's keys at etcd's revision.
#
# Then the same db is installed into a live member: `cetcd --prepare-only`,
# stored and gatewayd started on their own, and tests/tools/installdrive
# in raftd's place. While a client reads through gatewayd (serializable
# gets of every key), stored is SIGKILLed during the install and started
# again; the driver resends as raftd does. The gateway must never answer
# with a mix of the old and the new state, must serve the new one after,
# and must not restart.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

it_need_etcd
it_need_etcdctl
t=$IT_BUILD/tests/unit/stored/test_install
[[ -x $t ]] || it_skip "$t is not built"
it_init install_etcd
export ETCDCTL_API=3

it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log"
check "etcd is healthy" it_wait_healthy "$IT_ETCD_PORT" 30
ep=127.0.0.1:$IT_ETCD_PORT
for i in $(seq 1 120); do
	etcdctl --endpoints "$ep" put "etcd/$(printf %04d "$i")" "value-$i" >/dev/null
done
for i in $(seq 1 40); do
	etcdctl --endpoints "$ep" put "etcd/$(printf %04d "$i")" "again-$i" >/dev/null
done
etcdctl --endpoints "$ep" del etcd/0100 >/dev/null
etcdctl --endpoints "$ep" del etcd/0050 etcd/0060 >/dev/null
lease=$(etcdctl --endpoints "$ep" lease grant 600 | awk '{ print $2 }')
etcdctl --endpoints "$ep" put etcd/leased v --lease "$lease" >/dev/null
keys=$(etcdctl --endpoints "$ep" get etcd/ --prefix --keys-only | grep -c .)
check "etcd took the puts ($keys keys)" test "$keys" -eq 110
check "etcdctl snapshot save from etcd" \
	etcdctl --endpoints "$ep" snapshot save "$IT_TMP/etcd.db"
rev=$(etcdctl snapshot status "$IT_TMP/etcd.db" -w json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
truncate -s -32 "$IT_TMP/etcd.db"

st=0
STORED_ETCD_DB=$IT_TMP/etcd.db STORED_ETCD_KEYS=$keys STORED_ETCD_REV=$rev \
	"$t" >"$IT_TMP/install.out" 2>&1 || st=$?
sed -n '/etcd.s db/p;/CHECK/p;/^ok/p' "$IT_TMP/install.out" | sed 's/^/    /'
if ! grep -q '^ok: ' "$IT_TMP/install.out"; then
	echo "    stored/test_install exited with status $st; the end of its output:"
	grep -v '"level":"\(info\|warn\)"' "$IT_TMP/install.out" | tail -15 | sed 's/^/    /'
fi
check "stored installed etcd's db: its $keys keys at revision $rev, and applies after it" \
	grep -q "installed: revision $((rev + 1)), $keys keys under etcd/" "$IT_TMP/install.out"
check "stored/test_install passed" grep -q '^ok: ' "$IT_TMP/install.out"
kill -TERM "$IT_ETCD_PID"

# ---- the live member
drive=$IT_BUILD/tests/installdrive
[[ -x $drive ]] || it_skip "$drive is not built"
it_need_cetcd
rt=$IT_RT/live
mkdir -p "$rt"
chmod 700 "$rt"
read -r cport pport < <(it_free_ports 2)
flags=(--name l1 --data-dir "$IT_TMP/live" --runtime-dir "$rt" --gateways 1
	--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport"
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport")
log=$IT_TMP/live.log
"$IT_BIN/cetcd" --prepare-only "${flags[@]}" 2>"$log"
start_stored() {
	"$IT_BIN/stored" "${flags[@]}" 2>>"$log" &
	stored_pid=$!
	it_track "$stored_pid"
}
start_stored
"$IT_BIN/gatewayd" --gateway-index=0 "${flags[@]}" 2>>"$log" &
gw_pid=$!
it_track "$gw_pid"
pre=30
post=20
"$drive" "$rt/region" "$IT_TMP/etcd.db" "$pre" "$post" "$IT_TMP/go" >"$IT_TMP/drive.out" 2>>"$log" &
it_track $!
check "stored applied the driver's first puts" it_wait_log "$IT_TMP/drive.out" '^pre-applied' 30
lep=127.0.0.1:$cport

# counts: "pre etcd post" keys as one serializable read through gatewayd sees them
counts() {
	etcdctl --endpoints "$lep" --command-timeout 3s get "" --prefix --keys-only --consistency=s 2>/dev/null |
		awk -F/ 'NF { c[$1]++ } END { print c["pre"] + 0, c["etcd"] + 0, c["post"] + 0 }'
}
check "gatewayd serves the old state" test "$(counts)" = "$pre 0 0"
(while [[ ! -f $IT_TMP/stop ]]; do counts; done >"$IT_TMP/reads") &
reads_pid=$!
check "reads through gatewayd go on before the install" it_wait_log "$IT_TMP/reads" "^$pre 0 0\$" 10 3
touch "$IT_TMP/go"
it_until 10000 test -f "$IT_TMP/live/member/snap/db.installing" || true
kill -9 "$stored_pid"
wait "$stored_pid" 2>/dev/null || true
start_stored
check "the driver saw stored's install through, after a SIGKILL and a resend" \
	it_wait_log "$IT_TMP/drive.out" '^done ' 30
sed 's/^/    driver: /' "$IT_TMP/drive.out"
# the reads go on until they see the new state (checked below)
it_wait_log "$IT_TMP/reads" "^0 $keys [0-9]+\$" 10 || true
touch "$IT_TMP/stop"
wait "$reads_pid" || true
check "gatewayd serves the installed state: etcd's $keys keys and the puts after" \
	test "$(counts)" = "0 $keys $post"
lrev=$(etcdctl --endpoints "$lep" get x --consistency=s -w json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
check "at etcd's revision plus the puts after ($lrev)" test "$lrev" = $((rev + post))
old=$(grep -c "^$pre 0 0\$" "$IT_TMP/reads" || true)
new=$(grep -cE "^0 $keys [0-9]+\$" "$IT_TMP/reads" || true)
other=$(grep -cvE "^$pre 0 0\$|^0 $keys [0-9]+\$|^0 0 0\$" "$IT_TMP/reads" || true)
echo "  reads during the install: $old of the old state, $new of the new, $other else"
check "no read saw a mix of the two states" test "$other" = 0
check "reads saw both" test "$old" -gt 0 -a "$new" -gt 0
check "gatewayd moved over without a restart" kill -0 "$gw_pid"
# The SIGKILL above may land after the installed db was renamed into
# place and before stored logged it: the restarted stored then opens the
# installed db, at the install's index, and has nothing to install.
iidx=$(sed -n 's/^pre-applied [0-9]* install-index \([0-9]*\).*/\1/p' "$IT_TMP/drive.out")
install_logged() {
	grep -q '"installed the received snapshot db".*"index-rebuilt":true' "$log" ||
		grep -qE '"msg":"opened the db".*"consistent-index":'"${iidx:-x}"'[,}]' "$log"
}
check "stored logged the install with cetcd's index built for etcd's db (or reopened the installed db)" \
	install_logged
it_summary
