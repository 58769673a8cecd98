#!/usr/bin/env bash
# Users and roles in a mixed cluster: one Debian etcd 3.4 member and two
# cetcd members on etcd's peer protocol.
#   - users and roles added through the etcd member and through either
#     cetcd member apply alike: `user get`, `role get`, `user list` and
#     `role list` print the same on every member;
#   - a user added through a cetcd member (proposed with hashedPassword
#     and the password) logs in on the etcd member with its password once
#     auth is enabled: etcd 3.4 hashed the password it was sent;
#   - auth enabled through a cetcd member is enabled on every member, and
#     disabled through the etcd member, on every member.
# Exits 77 when the programs, Debian's etcd or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init authmixed

ctl() { it_cl_ctl "$@"; }

kinds=(etcd cetcd cetcd)
it_cl_init authmixed 3 x
for i in 0 1 2; do it_cl_start "$i" "${kinds[i]}" --bcrypt-cost 6; done
for i in 0 1 2; do it_cl_answers "$i" "x$i (${kinds[i]}) answers" || { it_summary; exit 1; }; done
ok "three members answer"

check "a user added through etcd" grep -q "User u0 created" <(ctl 0 user add u0:pw0)
check "a user added through cetcd" grep -q "User u1 created" <(ctl 1 user add u1:pw1)
check "one without a password through the other cetcd" \
	grep -q "User u2 created" <(ctl 2 user add u2 --no-password)
check "a role added through cetcd" grep -q "Role r created" <(ctl 1 role add r)
check "its permissions through etcd" grep -q "updated" <(ctl 0 role grant-permission --prefix r readwrite k/)
check "and through cetcd" grep -q "updated" <(ctl 2 role grant-permission r read a z)
check "granted through cetcd" grep -q "granted" <(ctl 2 user grant-role u0 r)
check "and through etcd" grep -q "granted" <(ctl 0 user grant-role u1 r)
check "a duplicate refused alike" grep -q "Error: etcdserver: user name already exists" <(ctl 1 user add u0:x)

# what each member prints, applied alike everywhere
view() { ctl "$1" user list; ctl "$1" role list; ctl "$1" user get u0; ctl "$1" user get u1 --detail; ctl "$1" role get r; }
same_views() {
	view 0 >"$IT_TMP/view.0"
	view 1 >"$IT_TMP/view.1"
	view 2 >"$IT_TMP/view.2"
	cmp -s "$IT_TMP/view.0" "$IT_TMP/view.1" && cmp -s "$IT_TMP/view.0" "$IT_TMP/view.2"
}
if it_until 10000 same_views; then
	ok "every member prints the same users and roles"
else
	fail "every member prints the same users and roles"
	diff "$IT_TMP/view.0" "$IT_TMP/view.1" || true
	diff "$IT_TMP/view.0" "$IT_TMP/view.2" || true
fi
check "which are the ones added" grep -qx "u2" "$IT_TMP/view.1"

# root through cetcd, auth enabled through cetcd
check "root added through cetcd" grep -q "User root created" <(ctl 1 user add root:rootpw)
check "auth enabled through cetcd" grep -q "Authentication Enabled" <(ctl 2 auth enable)
refused() { ctl "$1" user list | grep -q "Error: etcdserver: user name is empty"; }
for i in 0 1 2; do
	check "x$i (${kinds[i]}) refuses management without a user" it_until 10000 refused "$i"
done
check "the etcd member logs root in (password cetcd proposed)" \
	grep -qx "u2" <(ctl 0 --user root:rootpw user list)
check "and u1, added through cetcd" grep -q "^User: u1" <(ctl 0 --user u1:pw1 user get u1)
check "a wrong password refused" grep -q "authentication failed" <(ctl 0 --user u1:pw0 user get u1)
check "auth disabled through etcd" grep -q "Authentication Disabled" <(ctl 0 --user root:rootpw auth disable)
allowed() { ctl "$1" user list | grep -qx root; }
for i in 1 2; do
	check "x$i (${kinds[i]}) takes management without a user again" it_until 10000 allowed "$i"
done
check "the members still agree" it_until 10000 same_views
it_cl_stop 0 1 2
it_summary
