#!/usr/bin/env bash
# Permission decisions in a mixed cluster: one Debian etcd 3.4 member and
# one cetcd member on etcd's peer protocol.
#   - auth enabled through the etcd member, disabled and enabled again
#     through the cetcd member; permissions granted and revoked through
#     each: the same etcdctl get, put, del and txn of a user sent through
#     either member get the same answers;
#   - a simple token taken from one member's JSON gateway reads through
#     the other's (etcd assigns the token at apply on every member);
#   - a Txn holding a Txn that puts a key its user may not write, sent to
#     the etcd member, is applied by it (etcd 3.4 does not look into a
#     nested Txn at apply), so cetcd applies it too: both members then
#     answer the same HashKV;
#   - a second cluster with JWT tokens, the same RSA key on both members:
#     a JWT from either member reads through the other, with the
#     permissions of its user, and one signed by another key is refused
#     alike.
# Exits 77 when the programs, Debian's etcd, etcdctl, curl or openssl are
# missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_need_program curl
it_need_program openssl "Debian package openssl"
it_init authmixedenf

ctl() { it_cl_ctl "$@"; }
R=(--user root:rootpw)
A=(--user alice:alicepw)

kinds=(etcd cetcd)
it_cl_init authmixedenf 3 y
IT_CL_INITIAL=$(it_cl_initial 0 1) # two of the three
for i in 0 1; do it_cl_start "$i" "${kinds[i]}" --bcrypt-cost 6; done
for i in 0 1; do it_cl_answers "$i" "y$i (${kinds[i]}) answers" || { it_summary; exit 1; }; done
ok "two members answer"

check "root added through cetcd" grep -q "User root created" <(ctl 1 user add root:rootpw)
check "alice through etcd" grep -q "User alice created" <(ctl 0 user add alice:alicepw)
check "role r through etcd" grep -q "Role r created" <(ctl 0 role add r)
check "readwrite on a/ granted through etcd" \
	grep -q "updated" <(ctl 0 role grant-permission --prefix r readwrite a/)
check "read on b/ through cetcd" grep -q "updated" <(ctl 1 role grant-permission --prefix r read b/)
check "r given to alice through cetcd" grep -q "granted" <(ctl 1 user grant-role alice r)
check "root gets the root role through etcd" grep -q "granted" <(ctl 0 user grant-role root root)
check "auth enabled through etcd" grep -q "Authentication Enabled" <(ctl 0 auth enable)
refused() { ctl "$1" get a/1 | grep -q "user name is empty"; }
for i in 0 1; do
	check "y$i (${kinds[i]}) refuses a get without a user" it_until 10000 refused "$i"
done

# txn I SPEC: alice's etcdctl txn at member I, SPEC (printf's format) on
# its stdin
txn() {
	# shellcheck disable=SC2059
	printf "$2" | etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$(it_cl_ep "$1")" \
		"${A[@]}" txn 2>&1 | grep -v '^{"level"' || true
}
# the same requests of alice's through each member, one member after the
# other (a put's answer is the same whichever member applied it first)
reqs() {
	local i=$1
	echo "> get a/1"; ctl "$i" "${A[@]}" get a/1
	echo "> get b/1"; ctl "$i" "${A[@]}" get b/1
	echo "> get c/1"; ctl "$i" "${A[@]}" get c/1
	echo "> get --prefix ''"; ctl "$i" "${A[@]}" get --prefix ''
	echo "> put a/2"; ctl "$i" "${A[@]}" put a/2 x
	echo "> put b/2"; ctl "$i" "${A[@]}" put b/2 x
	echo "> put --prev-kv a/2"; ctl "$i" "${A[@]}" put --prev-kv a/2 x
	echo "> del b/1"; ctl "$i" "${A[@]}" del b/1
	echo "> del --prefix a/"; ctl "$i" "${A[@]}" del --prefix a/9
	echo "> txn compare b/1, put a/3"
	txn "$i" 'value("b/1") = "vb/1"\n\nput a/3 y\n\nput a/4 n\n\n'
	echo "> txn compare c/1"
	txn "$i" 'value("c/1") = "vc/1"\n\nput a/3 y\n\n\n'
	echo "> txn put c/2 in failure"
	txn "$i" 'value("a/1") = "nope"\n\nput a/3 y\n\nput c/2 z\n\n'
	echo "> user get alice"; ctl "$i" "${A[@]}" user get alice
	echo "> role get r"; ctl "$i" "${A[@]}" role get r
	echo "> user list"; ctl "$i" "${A[@]}" user list
	echo "> wrong password"; ctl "$i" --user alice:x get a/1
}
# reset: a/, b/ and c/ hold a/1, b/1 and c/1 again (root's, through etcd)
reset() {
	ctl 0 "${R[@]}" del --prefix a/ >/dev/null
	ctl 0 "${R[@]}" del --prefix b/ >/dev/null
	ctl 0 "${R[@]}" del --prefix c/ >/dev/null
	for k in a/1 b/1 c/1; do ctl 0 "${R[@]}" put "$k" "v$k" >/dev/null; done
}
# same_answers WHAT: reqs through each member, each from the same keys,
# compared
same_answers() {
	reset
	reqs 0 >"$IT_TMP/ans.0"
	reset
	reqs 1 >"$IT_TMP/ans.1"
	if cmp -s "$IT_TMP/ans.0" "$IT_TMP/ans.1"; then
		ok "$1: the same answers through etcd and cetcd"
	else
		fail "$1: the same answers through etcd and cetcd"
		diff "$IT_TMP/ans.0" "$IT_TMP/ans.1" || true
	fi
}
same_answers "enabled through etcd"
check "which grant and refuse" \
	grep -q "permission denied" "$IT_TMP/ans.0"
check "and permit" grep -qx "va/1" "$IT_TMP/ans.0"
check "b/1 readable" grep -qx "vb/1" "$IT_TMP/ans.0"
check "alice's txns answered" grep -qx SUCCESS "$IT_TMP/ans.0"

# revoked through cetcd, granted through etcd
check "read on b/ revoked through cetcd" \
	grep -q "revoked" <(ctl 1 "${R[@]}" role revoke-permission --prefix r b/)
denied_b() { ctl "$1" "${A[@]}" get b/1 | grep -q "permission denied"; }
for i in 0 1; do check "y$i (${kinds[i]}) refuses b/1 to alice" it_until 10000 denied_b "$i"; done
check "write on c/ granted through etcd" \
	grep -q "updated" <(ctl 0 "${R[@]}" role grant-permission --prefix r write c/)
same_answers "after a revoke and a grant"
check "b/1 no longer readable" grep -q "permission denied" <(sed -n '/> get b\/1/,/>/p' "$IT_TMP/ans.1")

# disabled and enabled again through cetcd
check "auth disabled through cetcd" grep -q "Authentication Disabled" <(ctl 1 "${R[@]}" auth disable)
open_to_all() { [[ $(ctl "$1" get c/1) == *vc/1* ]]; }
for i in 0 1; do check "y$i (${kinds[i]}) answers without a user" it_until 10000 open_to_all "$i"; done
same_answers "auth disabled"
check "auth enabled through cetcd" grep -q "Authentication Enabled" <(ctl 1 auth enable)
for i in 0 1; do check "y$i (${kinds[i]}) refuses a get without a user again" it_until 10000 refused "$i"; done
same_answers "enabled through cetcd"

# a simple token taken from one member used on the other
token() { it_gw_token "$(it_cl_ep "$1")" alice alicepw; }
# gw I TOKEN PATH BODY: the answer's count, message or error
gw() { it_gw_call "$(it_cl_ep "$1")" "${@:2}"; }
for from in 0 1; do
	to=$((1 - from))
	tok=$(token "$from")
	check "a simple token from y$from (${kinds[from]})" test -n "$tok"
	# "a/1": YS8x; "c/1": Yy8x
	check "reads a/1 on y$to (${kinds[to]})" grep -qx 1 <(gw "$to" "$tok" /v3/kv/range '{"key":"YS8x"}')
	check "and on y$from" grep -qx 1 <(gw "$from" "$tok" /v3/kv/range '{"key":"YS8x"}')
	check "but not c/1 on y$to" grep -q "permission denied" \
		<(gw "$to" "$tok" /v3/kv/range '{"key":"Yy8x"}')
done
check "a token that is none refused alike" \
	cmp -s <(gw 0 nosuch.1 /v3/kv/range '{"key":"YS8x"}') <(gw 1 nosuch.1 /v3/kv/range '{"key":"YS8x"}')

# a Txn in a Txn putting b/9, which alice may not write, through etcd
check "write on c/ revoked through cetcd" \
	grep -q "revoked" <(ctl 1 "${R[@]}" role revoke-permission --prefix r c/)
tok=$(token 0)
nested='{"success":[{"request_txn":{"success":[{"request_put":{"key":"Yi85","value":"bg=="}}]}}]}'
check "etcd applies alice's Txn with a nested put of b/9" \
	grep -qx none <(gw 0 "$tok" /v3/kv/txn "$nested")
hashkv() {
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$1" "${R[@]}" endpoint hashkv \
		-w json | python3 -c 'import json,sys; d=json.load(sys.stdin)[0]["HashKV"]; print(d["hash"], d["header"]["revision"])'
}
same_hashkv() { it_all_same '[0-9]+ [1-9][0-9]*' hashkv "$(it_cl_ep 0)" "$(it_cl_ep 1)"; }
if it_agreed 10000 same_hashkv; then ok "both members answer the same HashKV"; else
	fail "both members answer the same HashKV"; fi
for i in 0 1; do
	check "y$i (${kinds[i]}) holds b/9" grep -qx n <(ctl "$i" "${R[@]}" get --print-value-only b/9)
done
check "cetcd refuses the same Txn before proposing it (beyond etcd 3.4.23)" \
	grep -q "permission denied" <(gw 1 "$(token 1)" /v3/kv/txn "$nested")
it_cl_stop 0 1

# JWTs: another cluster, both members signing with one key
openssl genrsa -out "$IT_TMP/jwt.key" 2048 2>/dev/null
openssl rsa -in "$IT_TMP/jwt.key" -pubout -out "$IT_TMP/jwt.pub" 2>/dev/null
openssl genrsa -out "$IT_TMP/other.key" 2048 2>/dev/null
it_cl_init authmixedjwt 3 z
IT_CL_INITIAL=$(it_cl_initial 0 1)
jwt_flag="jwt,pub-key=$IT_TMP/jwt.pub,priv-key=$IT_TMP/jwt.key,sign-method=RS256,ttl=5m"
for i in 0 1; do it_cl_start "$i" "${kinds[i]}" --bcrypt-cost 6 --auth-token "$jwt_flag"; done
for i in 0 1; do it_cl_answers "$i" "z$i (${kinds[i]}) answers" || { it_summary; exit 1; }; done
for c in "user add root:rootpw" "user grant-role root root" "user add alice:alicepw" "role add r" \
	"role grant-permission --prefix r readwrite a/" "user grant-role alice r" "put a/1 va/1" \
	"put c/1 vc/1"; do
	# shellcheck disable=SC2086
	ctl 1 $c >/dev/null
done
check "auth enabled (JWT)" grep -q "Authentication Enabled" <(ctl 0 auth enable)
for i in 0 1; do
	check "z$i (${kinds[i]}) refuses a get without a user" it_until 10000 refused "$i"
done
for from in 0 1; do
	to=$((1 - from))
	tok=$(token "$from")
	check "a JWT from z$from (${kinds[from]})" grep -q '^[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.' <<<"$tok"
	check "reads a/1 on z$to (${kinds[to]})" grep -qx 1 <(gw "$to" "$tok" /v3/kv/range '{"key":"YS8x"}')
	check "but not c/1 there" grep -q "permission denied" <(gw "$to" "$tok" /v3/kv/range '{"key":"Yy8x"}')
done
# the same claims signed by another key
forged="${tok%.*}.$(printf '%s' "${tok%.*}" | openssl dgst -sha256 -sign "$IT_TMP/other.key" |
	base64 -w0 | tr '+/' '-_' | tr -d '=')"
gw 0 "$forged" /v3/kv/range '{"key":"YS8x"}' >"$IT_TMP/forged.0"
gw 1 "$forged" /v3/kv/range '{"key":"YS8x"}' >"$IT_TMP/forged.1"
check "a JWT signed by another key refused by etcd" grep -q "invalid auth token" "$IT_TMP/forged.0"
check "and alike by cetcd" cmp -s "$IT_TMP/forged.0" "$IT_TMP/forged.1"
it_cl_stop 0 1
it_summary
