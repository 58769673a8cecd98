#!/usr/bin/env bash
# --discovery-srv and --discovery-srv-name, as etcd 3.4's: three cetcd
# members bootstrap from the SRV records of example.test that a name
# server of the test's own serves (tests run in a network and mount
# namespace of their own, with their own resolv.conf, hosts and
# nsswitch.conf bound over /etc's):
#   - _etcd-server._tcp.example.test names m0, m1 and m2.example.test (A
#     records: 127.0.0.1) on three ports; each member advertises its own
#     name: they form one cluster whose member list has the three names
#     and the peer URLs of the records;
#   - a member whose advertised peer URL is not among the records exits 1
#     with etcd's "cannot find local etcd member" error;
#   - --discovery-srv-name c1 reads _etcd-server-c1._tcp instead (a
#     cluster of one).
# Exits 77 when not root (the namespaces need it), or when the programs,
# unshare, ip, etcdctl or python3 are missing.
source "$(dirname "$0")/lib.sh"

if [[ ${CETCD_DNS_NS:-} != 1 ]]; then
	it_need_cetcd
	it_need_etcdctl
	[[ $(id -u) == 0 ]] || it_skip "network and mount namespaces of the test's own need root"
	for t in unshare ip python3; do
		it_need_program "$t"
	done
	export CETCD_DNS_NS=1
	exec unshare --net --mount --propagation private -- bash "$0" "$@"
fi
ip link set lo up
it_init discovery-srv

read -r -a P < <(it_free_ports 8)
# peer ports P0..P2, client ports P3..P5; the c1 member's peer and client
printf '127.0.0.1 localhost\n' >"$IT_TMP/hosts"
printf 'hosts: files dns\n' >"$IT_TMP/nsswitch.conf"
printf 'nameserver 127.0.0.53\noptions timeout:1 attempts:1\n' >"$IT_TMP/resolv.conf"
for f in hosts nsswitch.conf resolv.conf; do
	mount --bind "$IT_TMP/$f" "/etc/$f"
done

# the name server: SRV and A records of example.test, NXDOMAIN otherwise
it_dns_start "$IT_TMP/dns.log" \
	SRV _etcd-server._tcp.example.test m0.example.test "${P[0]}" \
	SRV _etcd-server._tcp.example.test m1.example.test "${P[1]}" \
	SRV _etcd-server._tcp.example.test m2.example.test "${P[2]}" \
	SRV _etcd-server-c1._tcp.example.test c1.example.test "${P[6]}" \
	A m0.example.test A m1.example.test A m2.example.test A c1.example.test
check "m1.example.test resolves through it" bash -c 'getent ahosts m1.example.test | grep -q 127.0.0.1'

# member NAME PEER_PORT CLIENT_PORT [flags...]
member() {
	local name=$1 pp=$2 cp=$3
	shift 3
	mkdir -p "$IT_RT/$name" && chmod 700 "$IT_RT/$name"
	"$IT_BIN/cetcd" --name "$name" --data-dir "$IT_TMP/$name" --runtime-dir "$IT_RT/$name" \
		--listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
		--listen-peer-urls "http://127.0.0.1:$pp" \
		--initial-advertise-peer-urls "http://$name.example.test:$pp" \
		--discovery-srv example.test "$@" 2>>"$IT_TMP/$name.log" &
	PIDS+=($!)
	it_track $!
}
PIDS=()
for i in 0 1 2; do member "m$i" "${P[i]}" "${P[i + 3]}"; done
for i in 0 1 2; do
	it_member_answers "${P[i + 3]}" "$IT_TMP/m$i.log" "m$i, bootstrapped from SRV records, answers" || exit 1
done
check "m0 logs etcd's line for each record" \
	it_log_has "$IT_TMP/m0.log" '"msg":"got bootstrap from DNS for etcd-server","node":"m[0-2]=http://m[0-2].example.test:[0-9]+"' 3
members=$(etcdctl --endpoints "127.0.0.1:${P[3]}" member list 2>&1 | awk -F', ' '{print $3 "=" $4}' | sort | tr '\n' ' ')
want="m0=http://m0.example.test:${P[0]} m1=http://m1.example.test:${P[1]} m2=http://m2.example.test:${P[2]} "
check "one cluster of the three, with the records' peer URLs ($members)" test "$members" = "$want"
check "a put through m2 is read through m0" \
	eval 'etcdctl --endpoints 127.0.0.1:${P[5]} put k v >/dev/null &&
	      it_until 5000 eval "[[ \$(etcdctl --endpoints 127.0.0.1:${P[3]} get k --print-value-only) == v ]]"'
for p in "${PIDS[@]}"; do kill -TERM "$p"; done
for p in "${PIDS[@]}"; do it_wait_gone "$p" 15000 || kill -9 "$p"; done

# a member the records do not name
st=0
read -r xp xc < <(it_free_ports 2)
mkdir -p "$IT_RT/x" && chmod 700 "$IT_RT/x"
"$IT_BIN/cetcd" --name x --data-dir "$IT_TMP/x" --runtime-dir "$IT_RT/x" \
	--listen-client-urls "http://127.0.0.1:$xc" --advertise-client-urls "http://127.0.0.1:$xc" \
	--listen-peer-urls "http://127.0.0.1:$xp" --initial-advertise-peer-urls "http://127.0.0.1:$xp" \
	--discovery-srv example.test 2>"$IT_TMP/x.log" || st=$?
check "a member not in the records exits 1 ($st)" test "$st" -eq 1
check "saying etcd's error" grep -qF 'cannot find local etcd member \"x\" in SRV records' "$IT_TMP/x.log"

PIDS=()
member c1 "${P[6]}" "${P[7]}" --discovery-srv-name c1
it_member_answers "${P[7]}" "$IT_TMP/c1.log" "--discovery-srv-name c1: the member answers" || exit 1
check "it read _etcd-server-c1._tcp" grep -q '^query _etcd-server-c1._tcp.example.test 33 1' "$IT_TMP/dns.log"
check "a cluster of one" test "$(etcdctl --endpoints "127.0.0.1:${P[7]}" member list | wc -l)" -eq 1
kill -TERM "${PIDS[0]}"
it_wait_gone "${PIDS[0]}" 15000 || kill -9 "${PIDS[0]}"
it_summary
