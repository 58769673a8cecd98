#!/usr/bin/env bash
# Malformed and odd request bodies sent as raw gRPC calls to a cetcd
# member and to Debian's etcd 3.4, both fresh, in the same order: the
# gRPC status code and message of every answer must be the same. The
# bodies are proto_diff's corner cases (tests/proto/proto_diff.c): wire
# types a field does not declare (bool fields sent length-delimited or
# as fixed64, in Put, Range, DeleteRange, Compact and nested in Txn),
# illegal tags, end groups, over-long varints, negative and past-the-end
# lengths, unknown fields and groups etcd skips, and the first message of
# the Watch, LeaseKeepAlive and Snapshot streams. tests/tools/protodiff
# sends them. Exits 77 when etcd, go or etcd's Go sources are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
[[ -x $IT_BUILD/tests/proto_diff ]] || it_skip "$IT_BUILD/tests/proto_diff is not built"
it_build_go_tool protodiff go.etcd.io/etcd/etcdserver/etcdserverpb
it_init proto-grpc
"$IT_BUILD/tests/proto_diff" 1 0 "$IT_TMP/cases" "$IT_TMP/verdicts"

it_cetcd_start t1 "$IT_TMP/cetcd.data" "$IT_TMP/cetcd.log"
it_etcd_start t1 "$IT_TMP/etcd.data" "$IT_TMP/etcd.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "Debian's etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

"$IT_BUILD/tests/protodiff" grpc -endpoint "127.0.0.1:$IT_CPORT" <"$IT_TMP/cases" >"$IT_TMP/cetcd.out"
"$IT_BUILD/tests/protodiff" grpc -endpoint "127.0.0.1:$IT_ETCD_PORT" <"$IT_TMP/cases" >"$IT_TMP/etcd.out"
n=0
while IFS= read -r c && IFS= read -r a <&3 && IFS= read -r b <&4; do
	n=$((n + 1))
	if [[ $a == "$b" ]]; then
		ok "$c: $a"
	else
		fail "$c: cetcd \"$a\", etcd \"$b\""
	fi
done <"$IT_TMP/cases" 3<"$IT_TMP/cetcd.out" 4<"$IT_TMP/etcd.out"
check "every case answered by both ($n of $(wc -l <"$IT_TMP/cases"))" \
	[ "$n" -eq "$(wc -l <"$IT_TMP/cases")" ]
refused=$(grep -c '^13 grpc: error unmarshalling request: ' "$IT_TMP/etcd.out" || true)
check "etcd refused some as malformed ($refused)" [ "$refused" -gt 20 ]
refused=$(grep -c '^13 grpc: failed to unmarshal the received message ' "$IT_TMP/etcd.out" || true)
check "etcd refused stream messages as malformed ($refused)" [ "$refused" -ge 12 ]
it_summary
