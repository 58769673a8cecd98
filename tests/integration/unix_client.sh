#!/usr/bin/env bash
# Unix socket client URLs, as etcd's: --listen-client-urls with
# unix://localhost:PORT (the socket file "localhost:PORT", relative to the
# member's working directory) and unixs:// (TLS, here --auto-tls) beside
# an http:// one, on a member of two gatewayd processes, which share the
# one socket the launcher bound. etcdctl --endpoints unix://... puts and
# reads, and unixs://... takes a TLS handshake (openssl; etcdctl 3.4 does
# not reach etcd 3.4's unixs listener either); the socket keeps serving after SIGKILL of
# either gatewayd (the launcher hands the restarted one the same socket);
# a SIGTERM stop removes the files; after SIGKILL of the whole member the
# stale files are replaced on the next start.
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init unix-client

cd "$IT_TMP"
read -r IT_CPORT IT_PPORT U1 U2 < <(it_free_ports 4)
sock=localhost:$U1
tls=localhost:$U2
it_cetcd_start u1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 2 --auto-tls \
	--listen-client-urls "http://127.0.0.1:$IT_CPORT,unix://$sock,unixs://$tls"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd.log" "the member answers on http" || exit 1

ctl() { etcdctl --dial-timeout 2s --command-timeout 5s --endpoints "unix://$sock" "$@"; }
# N puts through unix://, then all are read back; $1 names them
puts() {
	local k
	for k in $(seq 1 10); do ctl put "$1/$k" v >/dev/null || return 1; done
	[[ $(ctl get "$1/" --prefix --keys-only | grep -c "^$1/") == 10 ]]
}
check "the socket file is there" test -S "$IT_TMP/$sock"
check "etcdctl --endpoints unix://$sock: 10 puts read back" puts a
# (etcdctl 3.4 does not reach etcd 3.4's unixs listener either: openssl does)
tls_h2() { echo | openssl s_client -unix "$IT_TMP/$tls" -alpn h2 2>/dev/null | grep -q '^ALPN protocol: h2'; }
check "unixs://$tls: a TLS handshake agrees on h2 (openssl s_client -unix)" tls_h2
check "the http listener sees the same keys" \
	test "$(etcdctl --endpoints "127.0.0.1:$IT_CPORT" get a/ --prefix --keys-only | grep -c '^a/')" -eq 10
for g in gatewayd-0 gatewayd-1; do
	pid=$(it_cetcd_child "$g")
	kill -9 "$pid"
	check "SIGKILL of $g: the launcher starts it again" eval 'it_wait_child "$g" "$pid" 30 >/dev/null'
	check "and unix:// serves 10 more puts" puts "after-$g"
done
check "every gatewayd started took the launcher's sockets (4 starts)" \
	test "$(grep -c '"msg":"took the client listeners the launcher bound"' "$IT_TMP/cetcd.log")" -ge 4
it_cetcd_stop
check "a SIGTERM stop removes the socket files" eval '[[ ! -e $IT_TMP/$sock && ! -e $IT_TMP/$tls ]]'
it_cetcd_restart "$IT_TMP/cetcd2.log"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd2.log" "the member starts again" || exit 1
check "unix:// serves after the restart" puts b
check "SIGKILL of the launcher takes every process with it" it_cetcd_kill
check "a SIGKILL leaves the socket file behind" test -S "$IT_TMP/$sock"
it_cetcd_restart "$IT_TMP/cetcd3.log"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd3.log" "the member starts on the stale socket files" || exit 1
check "unix:// serves again" puts c
it_cetcd_stop
it_summary
