#!/usr/bin/env bash
# Users and roles with etcdctl, beside Debian's etcd 3.4:
#   1. the same etcdctl commands against a cetcd member and an etcd member
#      (user add, with a password and --no-password, role add, grant and
#      revoke of permissions and roles, get, list, passwd, delete, a role
#      delete that takes the role from its users, auth enable without and
#      with the root role, management without a user once enabled, and
#      each of their errors) print the same lines on both;
#   2. etcd started on the data dir cetcd wrote lists the same users and
#      roles, and with auth enabled logs in root and alice with the
#      passwords cetcd hashed (a wrong one refused): the bcrypt hashes and
#      the buckets are etcd's;
#   3. cetcd started on the data dir etcd then wrote lists the user etcd
#      added, enables auth from it, and keeps auth enabled over a restart
#      (management without a user is refused).
# Exits 77 when the programs, etcd or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init authmgmt

# ctl PORT ARGS...: etcdctl's stdout and stderr, without clientv3's retry
# warnings (which name the endpoint and differ between runs).
ctl() {
	local port=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$port" "$@" \
		</dev/null 2>&1 | grep -v '^{"level"' || true
}

# The commands of part 1, one per line (words split on spaces).
script='user add root:rootpw
user add root:other
user add alice:alicepw
user add bob --no-password
passwd alice newpw
passwd nobody x
user get nobody
role add r1
role add r1
role add r2
role get nobody
role grant-permission r1 readwrite a c
role grant-permission r1 read a b
role grant-permission r1 write a c
role grant-permission --prefix r1 read p/
role grant-permission --from-key r1 write z
role grant-permission nobody read a
role get r1
role revoke-permission r1 a b
role revoke-permission r1 a b
role revoke-permission nobody a
role get r1
user grant-role alice r2
user grant-role alice r1
user grant-role alice r1
user grant-role alice nobody
user grant-role nobody r1
user grant-role bob r2
user get alice
user get alice --detail
user list
role list
user revoke-role alice nobody
user revoke-role nobody r1
role delete r2
user get alice
user get bob
role list
role delete r2
user revoke-role alice r1
user get alice
user grant-role alice r1
user delete bob
user delete bob
user list
auth enable
user grant-role root root
auth enable
user list
role add r3
auth disable'

# "passwd USER PW" changes a password as etcdctl reads it from stdin.
run_script() {
	local port=$1 line
	while IFS= read -r line <&3; do
		echo "> $line"
		if [[ $line == passwd\ * ]]; then
			read -r _ user pw <<<"$line"
			echo "$pw" | etcdctl --endpoints "127.0.0.1:$port" user passwd "$user" \
				--interactive=false 2>&1 | grep -v '^{"level"' || true
			continue
		fi
		# shellcheck disable=SC2086 # words on purpose
		ctl "$port" $line
	done 3<<<"$script"
}
# The lines the last "role get r1" of a script's output printed.
last_r1() { awk '/^> /{on = ($0 == "> role get r1"); if (on) b = ""; next} on {b = b $0 "\n"} END {printf "%s", b}' "$1"; }

data=$IT_TMP/m1
it_cetcd_start m1 "$data" "$IT_TMP/cetcd1.log" --bcrypt-cost 6
it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

# part 1
it_same_on_both run_script
check "errors were among them" grep -q "Error: etcdserver: role name not found" "$IT_TMP/cetcd.out"
check "management without a user was refused once auth was on" \
	grep -q "Error: etcdserver: user name is empty" "$IT_TMP/cetcd.out"

# part 2: etcd on cetcd's data dir (same name and URLs: the same ids).
# The script left auth enabled on cetcd; etcd logs root in with the
# password cetcd hashed.
check "cetcd stops" it_cetcd_stop
it_etcd_on_cetcd "$IT_TMP/etcd-on-cetcd.log"
# (its /health reads the store, which auth refuses: asked otherwise)
refuses_no_user() { ctl "$IT_CPORT" user list | grep -q "Error: etcdserver: user name is empty"; }
check "etcd starts on cetcd's data dir, auth enabled (no user: refused)" \
	it_until 30000 refuses_no_user
R="--user root:rootpw"
check "etcd lists cetcd's users, logging root in with cetcd's hash" \
	test "$(ctl "$IT_CPORT" $R user list | tr '\n' ' ')" = "alice root "
check "a wrong password is refused" \
	grep -q "authentication failed" <(ctl "$IT_CPORT" --user root:wrong user list)
check "etcd reads cetcd's role r1 as cetcd last showed it" \
	test "$(ctl "$IT_CPORT" $R role get r1)" = "$(last_r1 "$IT_TMP/cetcd.out")"
check "and alice's roles" \
	test "$(ctl "$IT_CPORT" $R user get alice | tr '\n' ' ')" = "User: alice Roles: r1 "
check "alice logs in with her new password (cetcd's hash of it)" \
	grep -q "^User: alice" <(ctl "$IT_CPORT" --user alice:newpw user get alice)
check "not with her first one" \
	grep -q "authentication failed" <(ctl "$IT_CPORT" --user alice:alicepw user get alice)
check "etcd adds a user" grep -q "User carol created" <(ctl "$IT_CPORT" $R user add carol:carolpw)
check "and grants it r1" grep -q "granted" <(ctl "$IT_CPORT" $R user grant-role carol r1)
check "etcd disables auth" grep -q "Authentication Disabled" <(ctl "$IT_CPORT" $R auth disable)
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 15000 || kill -9 "$IT_ETCD_PID"

# part 3: cetcd on the data dir etcd left
it_cetcd_restart "$IT_TMP/cetcd2.log"
check "cetcd starts on the data dir etcd left" it_wait_healthy "$IT_CPORT" 30
check "cetcd lists etcd's user" test "$(ctl "$IT_CPORT" user list | tr '\n' ' ')" = "alice carol root "
check "with its role" grep -q "^Roles: r1" <(ctl "$IT_CPORT" user get carol)
check "cetcd enables auth over etcd's users" \
	grep -q "Authentication Enabled" <(ctl "$IT_CPORT" auth enable)
check "management without a user is refused" \
	grep -q "Error: etcdserver: user name is empty" <(ctl "$IT_CPORT" user list)
check "cetcd stops" it_cetcd_stop
it_cetcd_restart "$IT_TMP/cetcd3.log"
check "cetcd restarts (no user: refused)" it_until 30000 refuses_no_user
check "auth is still enabled" \
	grep -q "Error: etcdserver: user name is empty" <(ctl "$IT_CPORT" role list)
check "cetcd stops again" it_cetcd_stop
it_summary
