#!/usr/bin/env bash
# The member region never outlives the member's processes, and a member's
# region is never taken from it by another member.
#
# Runs in a mount namespace of its own with a fresh tmpfs on /dev/shm, so
# that the tmpfs's usage is this test's alone and the members use their
# default runtime dir (/dev/shm/cetcd-<hash of the data dir>), as a user's
# would. Two members, M and N, run throughout. Meanwhile 50 members, each
# with a fresh data dir, are started and their launcher SIGKILLed (half of
# them once they serve, half at a random moment of their start); 50 more
# are stopped by SIGHUP (one started with SIGHUP ignored, as by nohup,
# is not), and 50 more lose every process to one SIGKILL at
# once. After each round of 50, /dev/shm holds nothing of them and its
# usage is what it was before the round. Then M and N still serve what
# they stored, with their own regions (different files, the same ones as
# at the start) and none of their processes restarted. A daemon of M that
# is SIGKILLed comes back on M's region. Stopping M and N returns the
# tmpfs to its usage before they started.
# Exits 77 when not root (a tmpfs of its own needs it), or when the
# programs, unshare, etcdctl or curl are missing.
source "$(dirname "$0")/lib.sh"

if [[ ${CETCD_REGION_NS:-} != 1 ]]; then
	it_need_cetcd
	it_need_etcdctl
	[[ $(id -u) == 0 ]] || it_skip "a tmpfs of the test's own on /dev/shm needs root"
	it_need_program unshare "Debian package util-linux"
	export CETCD_REGION_NS=1
	exec unshare --mount --propagation private -- bash -c \
		'mount -t tmpfs -o size=4g,mode=1777 cetcd-region-test /dev/shm && exec bash "$0" "$@"' \
		"$0" "$@"
fi
grep -qE '^cetcd-region-test /dev/shm tmpfs ' /proc/self/mounts ||
	it_skip "could not mount a tmpfs of the test's own on /dev/shm"
it_init region-lifetime

ROUNDS=${ROUNDS:-50}

shm_used_kb() { df -k --output=used /dev/shm | tail -1 | tr -d ' '; }
# What /dev/shm holds besides the test's own (empty) runtime dir.
shm_listing() { find /dev/shm -mindepth 1 ! -path "$IT_RT" ! -path "$IT_RT/*"; }
shm_clean() {
	local left
	left=$(shm_listing)
	[[ -z $left ]] && return 0
	echo "  /dev/shm still holds:"
	sed 's/^/    /' <<<"$left"
	return 1
}

# member_start NAME DATA_DIR LOG [flags...]: a launcher on fresh ports
# with the default runtime dir; sets MP (launcher pid) and MC (client port).
member_start() {
	local name=$1 data=$2 log=$3 pport hup=--default-signal=HUP
	shift 3
	if [[ ${1:-} == --nohup ]]; then
		hup=--ignore-signal=HUP
		shift
	fi
	read -r MC pport < <(it_free_ports 2)
	# (SIGHUP as asked, whatever started this script: ignored at start,
	# by nohup, the launcher keeps ignoring it)
	env "$hup" "$IT_BIN/cetcd" --name "$name" --data-dir "$data" \
		--listen-client-urls "http://127.0.0.1:$MC" \
		--advertise-client-urls "http://127.0.0.1:$MC" \
		--listen-peer-urls "http://127.0.0.1:$pport" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "$name=http://127.0.0.1:$pport" "$@" 2>>"$log" &
	MP=$!
	it_track "$MP"
}

# The launcher $1 and its children.
member_pids() { echo "$1" $(pgrep -P "$1" 2>/dev/null); }

# Waits until the launcher $1 runs its 2 + G daemons (G gateways).
has_children() { (($(pgrep -c -P "$1" 2>/dev/null || true) >= $2)); }

# The inodes of the region files process $1 maps, one per line.
region_inodes() {
	awk '$6 ~ "^/dev/shm/" { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u
}
# The region inode every process of member $1 (launcher pid) maps; fails
# unless all of them map exactly one and the same, and it has no name.
member_region() {
	local p ino all=
	for p in $(member_pids "$1"); do
		ino=$(region_inodes "$p")
		[[ -n $ino && $ino != *$'\n'* ]] || { echo "  (process $p maps: ${ino:-nothing})" >&2; return 1; }
		grep -q "$ino .*(deleted)" "/proc/$p/maps" || { echo "  (process $p maps a named region)" >&2; return 1; }
		all+="$ino "
	done
	all=$(tr ' ' '\n' <<<"$all" | sed '/^$/d' | sort -u)
	[[ -n $all && $all != *$'\n'* ]] || { echo "  (the processes map different regions: $all)" >&2; return 1; }
	echo "$all"
}

# Every process in $@ is gone within 5 s.
all_gone() {
	local p
	for p in "$@"; do
		it_wait_gone "$p" 5000 || { echo "  (process $p is still there)"; return 1; }
	done
}

# No process runs with data dir $1 any more (a child the launcher forked
# after its pids were listed included), within 5 s.
no_member_left() { ! pgrep -f -- "--data-dir $1 --listen-client-urls" >/dev/null; }
member_gone() {
	it_until 5000 no_member_left "$1" && return 0
	echo "  (still running with $1: $(pgrep -f -- "--data-dir $1 --listen-client-urls" | tr '\n' ' '))"
	return 1
}

ectl() { etcdctl --endpoints "127.0.0.1:$1" --dial-timeout 2s --command-timeout 5s "${@:2}"; }
ectl_put() { ectl "$1" put "$2" "$3" >/dev/null; }

used0=$(shm_used_kb)
echo "  tmpfs usage before any member: $used0 KiB"

# ------------------------------------------- two members that stay up
member_start M "$IT_TMP/M" "$IT_TMP/M.log" --gateways 2
m_pid=$MP m_port=$MC
member_start N "$IT_TMP/N" "$IT_TMP/N.log" --gateways 1
n_pid=$MP n_port=$MC
check "member M serves" it_wait_healthy "$m_port" 30
check "member N serves" it_wait_healthy "$n_port" 30
check "M runs raftd, stored and 2 gateways" it_until 10000 has_children "$m_pid" 4
check "N runs raftd, stored and 1 gateway" it_until 10000 has_children "$n_pid" 3
ectl_put "$m_port" owner M
ectl_put "$n_port" owner N
m_region=$(member_region "$m_pid") || m_region=
n_region=$(member_region "$n_pid") || n_region=
check "every process of M maps one region, which has no name" test -n "$m_region"
check "every process of N maps one region, which has no name" test -n "$n_region"
check "M and N have regions of their own" test "$m_region" != "$n_region"
m_pids=$(member_pids "$m_pid")
n_pids=$(member_pids "$n_pid")
check "their runtime dirs hold nothing" shm_clean
used_mn=$(shm_used_kb)
echo "  tmpfs usage with M and N: $used_mn KiB"
# An idle member's region holds a few MiB of tmpfs pages (its rings and
# the event ring give theirs back once quiet; about 2.7 MiB measured):
# over 1 MiB each tells that the regions live in this tmpfs.
region_min_kb=1024
check "the two regions take the tmpfs's memory (over 2 x 1 MiB)" \
	test $((used_mn - used0)) -gt $((2 * region_min_kb))

# A second launcher on M's data dir is refused and takes nothing from M.
set +e
member_start M "$IT_TMP/M" "$IT_TMP/M2.log"
wait "$MP"
st=$?
set -e
check "a second launcher on M's data dir exits 1" test "$st" -eq 1
check "saying another launcher runs for this member" \
	grep -q 'another cetcd launcher, or a process it started, is still running for this member' "$IT_TMP/M2.log"

# ------------------------------------------------------------ the rounds
# round KIND: ROUNDS members with fresh data dirs, each ended as KIND says:
#   kill    SIGKILL of the launcher (odd: once serving; even: at a random
#           moment of its start)
#   hup     SIGHUP to the launcher: a clean stop, exit 0
#   killall SIGKILL of the launcher and every daemon at once
round() {
	local kind=$1 i data log pids st bad=0 peak=0 used retries=0
	for ((i = 1; i <= ROUNDS; i++)); do
		data="$IT_TMP/$kind-$i"
		log="$IT_TMP/$kind-$i.log"
		member_start "r$i" "$data" "$log" --gateways 2
		if [[ $kind == kill && $((i % 2)) == 0 ]]; then
			sleep "0.$(printf '%03d' $((RANDOM % 300)))"
		else
			if ! it_until 20000 has_children "$MP" 4 || ! it_wait_healthy "$MC" 20; then
				# a port it_free_ports found free may be taken by
				# another program before the member binds it: that
				# member is started again on other ports
				if grep -q 'bind: Address already in use' "$log" && ((retries < 5)); then
					echo "  ($kind $i: a port was taken meanwhile; again on others)"
					kill -9 $(member_pids "$MP") 2>/dev/null || true
					wait "$MP" 2>/dev/null || true
					rm -rf "$data" "$log"
					retries=$((retries + 1))
					i=$((i - 1))
					continue
				fi
				echo "  ($kind $i did not come up; its log:)"
				tail -5 "$log" | sed 's/^/    /'
				bad=$((bad + 1))
			fi
			used=$(shm_used_kb)
			((used > peak)) && peak=$used
		fi
		pids=$(member_pids "$MP")
		case $kind in
		kill) kill -9 "$MP" ;;
		hup) kill -HUP "$MP" ;;
		killall) kill -9 $pids ;;
		esac
		st=0
		wait "$MP" 2>/dev/null || st=$?
		if [[ $kind == hup ]] && ((st != 0)); then
			echo "  (hup $i: the launcher exited $st)"
			bad=$((bad + 1))
		fi
		# shellcheck disable=SC2086
		all_gone $pids || bad=$((bad + 1))
		member_gone "$data" || bad=$((bad + 1))
	done
	echo "  $kind: $ROUNDS members, peak tmpfs usage $peak KiB, now $(shm_used_kb) KiB"
	ROUND_BAD=$bad ROUND_PEAK=$peak
}

for kind in kill hup killall; do
	round "$kind"
	check "$kind: all $ROUNDS members came up and every process of them is gone" test "$ROUND_BAD" -eq 0
	check "$kind: their regions used the tmpfs while they ran" \
		test $((ROUND_PEAK - used_mn)) -gt "$region_min_kb"
	check "$kind: /dev/shm holds nothing of them" shm_clean
	check "$kind: tmpfs usage is back to what it was ($used_mn KiB)" test "$(shm_used_kb)" -eq "$used_mn"
done
check "SIGHUP stopped each member cleanly" \
	test "$(cat "$IT_TMP"/hup-*.log | grep -c '"msg":"received signal; stopping the member","signal":"Hangup"')" -eq "$ROUNDS"
check "in order: the last line of each is 'stopped cetcd' with exit code 0" \
	test "$(for f in "$IT_TMP"/hup-*.log; do tail -1 "$f"; done | grep -c '"msg":"stopped cetcd","exit-code":0')" -eq "$ROUNDS"
# started with SIGHUP ignored (nohup), the member keeps serving through
# one, as etcd does, and stops on SIGTERM
member_start nohup "$IT_TMP/nohup" "$IT_TMP/nohup.log" --nohup
check "nohup: the member comes up" it_wait_healthy "$MC" 20
kill -HUP "$MP"
sleep 1
check "nohup: a SIGHUP leaves it serving" it_wait_healthy "$MC" 5
check "nohup: it logged no stop" bash -c '! grep -q "received signal" "$1"' _ "$IT_TMP/nohup.log"
kill -TERM "$MP"
st=0
wait "$MP" 2>/dev/null || st=$?
check "nohup: SIGTERM stops it, exit 0" test "$st" -eq 0

# ---------------------------------------- M and N lost nothing meanwhile
check "M still serves its own data" test "$(ectl "$m_port" get owner --print-value-only 2>&1)" = M
check "N still serves its own data" test "$(ectl "$n_port" get owner --print-value-only 2>&1)" = N
check "M takes writes" ectl_put "$m_port" after rounds
check "M's processes are the ones it started with" test "$(member_pids "$m_pid")" = "$m_pids"
check "N's processes are the ones it started with" test "$(member_pids "$n_pid")" = "$n_pids"
check "M maps the region it started with" test "$(member_region "$m_pid")" = "$m_region"
check "N maps the region it started with" test "$(member_region "$n_pid")" = "$n_region"
check "neither restarted a process" test "$(cat "$IT_TMP/M.log" "$IT_TMP/N.log" | grep -c '"msg":"restarting process"')" -eq 0

# --------------------------- a restarted daemon finds its member's region
stored_of() {
	local p
	for p in $(pgrep -P "$m_pid"); do
		[[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == */stored\ * ]] && echo "$p"
	done
	return 0
}
old=$(stored_of)
kill -9 "$old"
new_stored() { local p; p=$(stored_of); [[ -n $p && $p != "$old" ]]; }
check "SIGKILL of M's stored: the launcher starts it again" it_until 10000 new_stored
check "it attaches to M's region through the descriptor it inherited" \
	it_wait_log "$IT_TMP/M.log" '"logger":"stored".*"msg":"attached to the member region","region":"descriptor [0-9]+ from the launcher"' 10 2
check "M serves writes and reads again" it_until 10000 ectl_put "$m_port" after stored
check "with the data it had" test "$(ectl "$m_port" get after --print-value-only 2>&1)" = stored
check "M's new stored maps M's region" test "$(member_region "$m_pid")" = "$m_region"

# ------------------------------------------------------- M and N stop
kill -TERM "$m_pid" "$n_pid"
st=0
wait "$m_pid" || st=$?
wait "$n_pid" || st=$((st + $?))
check "M and N stop with exit 0" test "$st" -eq 0
check "then /dev/shm holds nothing of any member" shm_clean
check "and tmpfs usage is what it was before them ($used0 KiB)" test "$(shm_used_kb)" -eq "$used0"

it_summary
