#!/usr/bin/env bash
# Authenticate as etcd's EtcdServer.Authenticate: a token is answered only
# if the auth store's revision is still the one the password was checked
# at. The member hashes at bcrypt cost 14, so that a password check takes
# a good part of a second on the gateway's worker; while carol's check
# runs, root (with a token taken before, so no bcrypt of its own) adds a
# role through the JSON gateway. carol's login must still succeed, after
# the gateway logged that it checked her password again (etcdctl logs in
# while it dials: its dial timeout covers both checks).
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init authretry

it_cetcd_start c1 "$IT_TMP/c1" "$IT_TMP/cetcd.log" --bcrypt-cost 14
check "the member answers" it_wait_healthy "$IT_CPORT" 30
EP=127.0.0.1:$IT_CPORT
ctl() { etcdctl --dial-timeout 20s --command-timeout 30s --endpoints "$EP" "$@" </dev/null; }

ctl user add root:rootpw >/dev/null
ctl user grant-role root root >/dev/null
ctl user add carol:carolpw >/dev/null
ctl role add reader >/dev/null
ctl role grant-permission reader read k l >/dev/null
ctl user grant-role carol reader >/dev/null
ctl auth enable >/dev/null
ctl --user root:rootpw put k1 v1 >/dev/null
TOKEN=$(it_gw_token "$EP" root rootpw)
check "root has a token" test -n "$TOKEN"

retried() { grep -q 'revision when password checked became stale; retrying' "$IT_TMP/cetcd.log"; }
# up to three tries: the role must land while carol's password is checked
for try in 1 2 3; do
	ctl --user carol:carolpw get k1 --print-value-only >"$IT_TMP/carol.$try" 2>&1 &
	carol=$!
	sleep 0.5
	it_gw_call "$EP" "$TOKEN" /v3/auth/role/add "{\"name\":\"r$try\"}" >/dev/null
	st=0
	wait "$carol" || st=$?
	retried && break
done
check "carol's login and read went through (try $try): $(tr '\n' ' ' <"$IT_TMP/carol.$try")" \
	eval '[[ $st == 0 && $(cat "$IT_TMP/carol.$try") == v1 ]]'
check "the gateway checked her password again once the revision moved" retried
it_summary
