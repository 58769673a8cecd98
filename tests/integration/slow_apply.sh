#!/usr/bin/env bash
# --experimental-warning-apply-duration: an applied entry that takes longer
# is logged with etcd's "apply request took too long" line (its took,
# expected-duration and request fields, values shown as their sizes only)
# and counted in etcd_server_slow_apply_total; with a threshold no apply
# reaches, nothing is logged or counted.
# Exits 77 when etcdctl 3.4 or the programs are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program curl
it_init slow_apply

ctl() { ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$IT_CPORT" --command-timeout 5s "$@"; }
slow_total() {
	curl -fsS "http://127.0.0.1:$IT_CPORT/metrics" |
		awk '$1 == "etcd_server_slow_apply_total" {print $2}'
}
warnings() { it_count "$IT_CETCD_LOG" '"msg":"apply request took too long"'; }

# 1 ns: every entry is slow
it_cetcd_start s1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 1 \
	--experimental-warning-apply-duration 1ns
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
before=$(slow_total)
check "etcd_server_slow_apply_total is served" test -n "$before"
check "a put is applied" ctl put slowkey 0123456789
check "its apply is logged as too long" it_wait_log "$IT_CETCD_LOG" \
	'"msg":"apply request took too long".*"expected-duration":"1ns".*"request":"header:<ID:[0-9]+ > put:<key:\\"slowkey\\" value_size:10 >"' 10
line=$(grep '"msg":"apply request took too long".*slowkey' "$IT_CETCD_LOG" | head -1 || true)
check "the line has etcd's took and response fields" \
	grep -qE '"took":"[0-9.]+(ns|µs|ms|s)".*"response":"size:[0-9]+"' <<<"$line"
check "the value itself is not logged" test -z "$(grep -F 0123456789 <<<"$line")"
lease=$(ctl lease grant 60 | awk '/granted/ {print $2}')
check "a lease grant is logged as etcd's lease_grant" it_wait_log "$IT_CETCD_LOG" \
	"lease_grant:<ttl:60-second id:0*$lease>" 10
after=$(slow_total)
check "etcd_server_slow_apply_total counts them" test "$after" -ge "$((before + 2))"
it_cetcd_stop || true

# 1 h: nothing is slow
IT_CETCD_ARGS=("${IT_CETCD_ARGS[@]/1ns/1h}")
it_cetcd_restart "$IT_TMP/cetcd2.log"
check "cetcd answers again" it_wait_healthy "$IT_CPORT" 30
before=$(slow_total)
for i in 1 2 3; do ctl put "k$i" v >/dev/null; done
check "puts are applied" test "$(ctl get k3 --print-value-only)" = v
check "nothing is logged as too long" test "$(warnings)" -eq 0
check "nothing is counted" test "$(slow_total)" -eq "$before"
it_summary
