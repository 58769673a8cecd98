#!/usr/bin/env bash
# Permissions and tokens with auth enabled, beside Debian's etcd 3.4:
#   1. the same etcdctl commands against a cetcd member and an etcd member
#      (alice may write [k, l): her Puts, a Put outside, a Txn, a Delete
#      with prev_kv, a revoked permission granted back, no user, a wrong
#      password, bob reading before and after his delete) print the same
#      lines on both;
#   2. a simple token taken through the JSON gateway's Authenticate
#      reads, and answers what etcd answers once its user is deleted;
#   3. a key attached to a lease whose TTL runs out is gone: the revoke
#      stored proposes passes the check at apply as root's.
# Exits 77 when the programs, etcd or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init authapply

ctl() {
	local port=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$port" "$@" \
		</dev/null 2>&1 | grep -v '^{"level"' || true
}

R="--user root:rootpw"
A="--user alice:alicepw"
script="user add root:rootpw
user grant-role root root
user add alice:alicepw
user add bob:bobpw
role add rw
role grant-permission rw readwrite k l
user grant-role alice rw
user grant-role bob rw
auth enable
$A put k1 v1
$A put x v1
$A get k1
$A get k l
$A get a z
$A txn-placeholder
$A del --prev-kv k1
$A put k2 v2
$R role revoke-permission rw k l
$A put k2 v3
$A get k2
put k3 v
--user alice:wrong put k3 v
$R role grant-permission rw readwrite k l
$A put k2 v4
$A get k2
--user bob:bobpw get k2
$R user delete bob
--user bob:bobpw get k2
$R get k2"

run_script() {
	local port=$1 line
	while read -r line <&3; do
		echo "> $line"
		if [[ $line == *txn-placeholder ]]; then
			# a Txn whose compare reads outside alice's range
			printf 'value("x") = "v1"\n\nput k4 v\n\nput k5 v\n\n' |
				etcdctl --dial-timeout 2s --command-timeout 10s \
					--endpoints "127.0.0.1:$port" $A txn 2>&1 | grep -v '^{"level"' || true
			continue
		fi
		# shellcheck disable=SC2086 # words on purpose
		ctl "$port" $line
	done 3<<<"$script"
}

it_cetcd_start m1 "$IT_TMP/m1" "$IT_TMP/cetcd.log" --bcrypt-cost 4
it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/etcd.log" "" --bcrypt-cost 4
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

# part 1
it_same_on_both run_script
check "alice was denied a key outside her range" \
	grep -q "Error: etcdserver: permission denied" "$IT_TMP/cetcd.out"
check "a request without a user was refused" \
	grep -q "Error: etcdserver: user name is empty" "$IT_TMP/cetcd.out"
check "alice wrote again once write was granted back" \
	grep -qx "v4" "$IT_TMP/cetcd.out"
sed -n '/user delete bob/,$p' "$IT_TMP/cetcd.out" >"$IT_TMP/after-delete.out"
check "bob could not log in once deleted" \
	grep -q "Error: etcdserver: authentication failed" "$IT_TMP/after-delete.out"

# part 2: a token of carol's, taken through the JSON gateway's
# Authenticate, reads; once carol is deleted it answers what etcd's does.
# jget PORT PATH BODY [TOKEN]: the answer's token, count, or message.
jget() {
	curl -s -m 10 -X POST ${4:+-H "Authorization: $4"} "http://127.0.0.1:$1$2" -d "$3" |
		python3 -c 'import json, sys
m = json.load(sys.stdin)
print(m.get("token") or m.get("count") or m.get("message") or m.get("error") or "none")'
}
token_script() {
	local port=$1 tok
	ctl "$port" $R user add carol:carolpw
	ctl "$port" $R user grant-role carol rw
	tok=$(jget "$port" /v3/auth/authenticate '{"name":"carol","password":"carolpw"}')
	echo "> a simple token: $([[ $tok =~ ^[a-zA-Z]{16}\.[0-9]+$ ]] && echo yes)"
	echo "> range k2 with it" # "k2" in base64
	jget "$port" /v3/kv/range '{"key":"azI="}' "$tok"
	ctl "$port" $R user delete carol
	echo "> range k2 with it after carol's delete"
	jget "$port" /v3/kv/range '{"key":"azI="}' "$tok"
}
it_same_on_both token_script
check "the token read k2" grep -qx "1" "$IT_TMP/cetcd.out"
check "and stopped working with carol's delete" \
	grep -qx "etcdserver: invalid auth token" "$IT_TMP/cetcd.out"

# part 3: an expired lease's revoke passes the check at apply
id=$(ctl "$IT_CPORT" $R lease grant 3 | awk '/granted/ {print $2}')
check "root granted a lease" test -n "$id"
check "and put a key with it" grep -q OK <(ctl "$IT_CPORT" $R put --lease="$id" lk v)
gone() { [[ -z $(ctl "$IT_CPORT" $R get lk) ]]; }
check "the key is gone when the lease expires" it_until 20000 gone
check "cetcd stops" it_cetcd_stop
it_summary
