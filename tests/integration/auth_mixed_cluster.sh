#!/usr/bin/env bash
# Auth in a three-member cluster of two Debian etcd 3.4 members and one
# cetcd member (simple tokens, --auth-token-ttl 3):
#   - users, roles and permissions added through the etcd members and
#     through the cetcd member, auth enabled through the cetcd member: the
#     same requests of a user sent through each member get the same
#     answers (allowed and denied alike), before and after a grant and a
#     revoke through the other kind, and every member answers the same
#     HashKV;
#   - a simple token issued by any member is taken by every member (etcd
#     3.4 assigns it at apply on each one, auth/simple_token.go);
#   - its TTL runs on each member of its own, pushed on by each use there:
#     a token used every half second on the member that issued it stays valid
#     there and is refused (invalid auth token) by a member it was not
#     used on once the TTL passed, whichever kind issued it and whichever
#     kind refuses it, and one used nowhere is refused by every member.
# Exits 77 when the programs, Debian's etcd, etcdctl or curl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init authmixedcl

ctl() { it_cl_ctl "$@"; }
R=(--user root:rootpw)
A=(--user alice:alicepw)
TTL=3

kinds=(etcd etcd cetcd)
it_cl_init authmixedcl 3 m
for i in 0 1 2; do it_cl_start "$i" "${kinds[i]}" --bcrypt-cost 6 --auth-token simple --auth-token-ttl "$TTL"; done
for i in 0 1 2; do it_cl_answers "$i" "m$i (${kinds[i]}) answers" || { it_summary; exit 1; }; done
ok "three members answer"

check "root added through cetcd" grep -q "User root created" <(ctl 2 user add root:rootpw)
check "root gets the root role through etcd m0" grep -q "granted" <(ctl 0 user grant-role root root)
check "alice added through etcd m1" grep -q "User alice created" <(ctl 1 user add alice:alicepw)
check "role r added through cetcd" grep -q "Role r created" <(ctl 2 role add r)
check "readwrite on a/ granted through etcd m0" \
	grep -q "updated" <(ctl 0 role grant-permission --prefix r readwrite a/)
check "read on b/ granted through cetcd" grep -q "updated" <(ctl 2 role grant-permission --prefix r read b/)
check "r given to alice through etcd m1" grep -q "granted" <(ctl 1 user grant-role alice r)
for k in a/1 b/1 c/1; do ctl 1 put "$k" "v$k" >/dev/null; done
check "auth enabled through cetcd" grep -q "Authentication Enabled" <(ctl 2 auth enable)
IT_AUTH=root:rootpw # lib.sh's gets and HashKV from here on
refused() { ctl "$1" get a/1 | grep -q "user name is empty"; }
for i in 0 1 2; do
	check "m$i (${kinds[i]}) refuses a get without a user" it_until 10000 refused "$i"
done

# alice's requests through member I: each answer is the same whichever
# member (and in whichever order) they are sent through
reqs() {
	it_cl_replies "$1" alice:alicepw "get a/1" "get b/1" "get c/1" "get --prefix ''" "put a/2 x" \
		"put b/2 x" "put c/2 x" "del c/1" "user get alice" "role get r" "auth disable"
	echo "> wrong password"; ctl "$1" --user alice:x get a/1
}
# same_answers WHAT: alice's requests through each member, compared
same_answers() {
	local i
	for i in 0 1 2; do
		ctl 0 "${R[@]}" put c/1 vc/1 >/dev/null # alice may come to delete it
		reqs "$i" >"$IT_TMP/ans.$i"
	done
	if cmp -s "$IT_TMP/ans.0" "$IT_TMP/ans.1" && cmp -s "$IT_TMP/ans.0" "$IT_TMP/ans.2"; then
		ok "$1: the same $(grep -c '^>' "$IT_TMP/ans.0") answers through every member"
	else
		fail "$1: the same answers through every member"
		diff "$IT_TMP/ans.0" "$IT_TMP/ans.1" || true
		diff "$IT_TMP/ans.0" "$IT_TMP/ans.2" || true
	fi
}
# the answer to request REQ in ans.2 (cetcd's)
answer() { awk -v r="> $1" '$0 == r { f = 1; next } /^>/ { f = 0 } f' "$IT_TMP/ans.2"; }
same_hashkv() { it_same_hashkv "$(it_cl_ep 0)" "$(it_cl_ep 1)" "$(it_cl_ep 2)"; }

same_answers "enabled through cetcd"
check "alice reads a/1" grep -qx va/1 <(answer "get a/1")
check "and b/1" grep -qx vb/1 <(answer "get b/1")
check "but not c/1" grep -q "permission denied" <(answer "get c/1")
check "writes a/2" grep -qx OK <(answer "put a/2 x")
check "but not b/2" grep -q "permission denied" <(answer "put b/2 x")
check "nor auth disable" grep -q "permission denied" <(answer "auth disable")
check "a wrong password refused" grep -q "authentication failed" <(answer "wrong password")
if it_agreed 10000 same_hashkv; then ok "every member answers the same HashKV"; else
	fail "every member answers the same HashKV"; fi

# read on b/ revoked through etcd, write on c/ granted through cetcd
check "read on b/ revoked through etcd m1" \
	grep -q "revoked" <(ctl 1 "${R[@]}" role revoke-permission --prefix r b/)
check "write on c/ granted through cetcd" \
	grep -q "updated" <(ctl 2 "${R[@]}" role grant-permission --prefix r write c/)
granted_c() { ctl "$1" "${A[@]}" put c/2 y | grep -qx OK; }
for i in 0 1 2; do check "m$i (${kinds[i]}) lets alice write c/2" it_until 10000 granted_c "$i"; done
same_answers "after a revoke through etcd and a grant through cetcd"
check "b/1 no longer readable" grep -q "permission denied" <(answer "get b/1")
check "c/2 writable" grep -qx OK <(answer "put c/2 x")
check "c/1 deletable" grep -qx 1 <(answer "del c/1")
if it_agreed 10000 same_hashkv; then ok "every member answers the same HashKV again"; else
	fail "every member answers the same HashKV again"; fi

# simple tokens across members: "a/1" is YS8x, "c/1" Yy8x
for k in a/1 c/1; do ctl 0 "${R[@]}" put "$k" "v$k" >/dev/null; done
check "read on c/ revoked through cetcd" \
	grep -q "revoked" <(ctl 2 "${R[@]}" role revoke-permission --prefix r c/)
reads() { grep -qx 1 <(it_gw_call "$(it_cl_ep "$1")" "$2" /v3/kv/range '{"key":"YS8x"}'); }
invalid() { grep -qx "etcdserver: invalid auth token" <(it_gw_call "$(it_cl_ep "$1")" "$2" /v3/kv/range '{"key":"YS8x"}'); }
for from in 0 1 2; do
	tok=$(it_gw_token "$(it_cl_ep "$from")" alice alicepw)
	check "a simple token from m$from (${kinds[from]})" grep -q '^[A-Za-z]*\.[0-9]*$' <<<"$tok"
	for to in 0 1 2; do
		((to == from)) || check "reads a/1 on m$to (${kinds[to]})" reads "$to" "$tok"
	done
	check "but not c/1 on any member" eval '! grep -qv "permission denied" <(for to in 0 1 2; do
		it_gw_call "$(it_cl_ep "$to")" "$tok" /v3/kv/range "{\"key\":\"Yy8x\"}"; done)'
done
check "a token that is none refused alike" eval 'invalid 0 nosuch.1 && invalid 1 nosuch.1 && invalid 2 nosuch.1'

# the TTL of each member: etcd m0's token kept in use on m0 alone and
# cetcd m2's on m2 alone, for TTL + 2 s; m1's used nowhere. A token must
# hold while each use comes within the TTL of the one before (from the
# start of the last use that took it to the end of this one); a refusal
# after a longer gap (a test slowed by a busy machine) checks nothing and
# is counted apart. Each token must be taken past its TTL (from the end
# of the request that issued it to the start of its last use).
for i in 0 1 2; do
	tok[i]=$(it_gw_token "$(it_cl_ep "$i")" alice alicepw)
	used[i]=$(it_now_ms) first[i]=${used[i]}
done
end=$(($(it_now_ms) + (TTL + 2) * 1000))
kept=0 lost=0 late=0
while (($(it_now_ms) < end)); do
	for i in 0 2; do
		t0=$(it_now_ms)
		if reads "$i" "${tok[i]}"; then
			kept=$((kept + 1)) used[i]=$t0
		elif (($(it_now_ms) - used[i] < TTL * 1000)); then
			lost=$((lost + 1))
		else
			late=$((late + 1))
		fi
	done
	sleep 0.5
done
check "a token used every half second stays valid where it is used ($kept uses, $lost lost, $late too late to count)" \
	eval '((lost == 0 && used[0] - first[0] > TTL * 1000 && used[2] - first[2] > TTL * 1000))'
check "etcd's token, unused on cetcd m2 for $((TTL + 2)) s, is refused there" invalid 2 "${tok[0]}"
check "and on etcd m1" invalid 1 "${tok[0]}"
check "cetcd's token, unused on etcd m0 and m1, is refused by both" \
	eval 'invalid 0 "${tok[2]}" && invalid 1 "${tok[2]}"'
check "m1's token, used nowhere, is refused by every member" \
	eval 'invalid 0 "${tok[1]}" && invalid 1 "${tok[1]}" && invalid 2 "${tok[1]}"'
it_cl_stop 0 1 2
it_summary
