# shellcheck shell=bash
# Shared by the integration tests that run a real cetcd member (and
# Debian's etcd beside it) on loopback; they source it.
#
# What it gives:
#   it_init NAME            unique temp dirs, the exit trap that stops and
#                           removes everything (IT_KEEP=1 keeps the dirs)
#   it_need_* ...           exit 77 with the reason when a tool is missing
#   it_free_ports N         N distinct free loopback ports, below the
#                           ephemeral range, reserved (never 2379/2380)
#   it_cetcd_start ...      the launcher on fresh ports (IT_CPORT ...), in the
#                           background; it_cetcd_restart, it_cetcd_stop
#   it_cetcd_kill           SIGKILL of the launcher, which takes its daemons
#   it_cetcd_kill_restart ACKS WRITER OUT LOG   the same under kvclient
#                           writers, then a start, and writes flow again
#   it_cetcd_child WHAT     the pid of raftd, stored or gatewayd-<i>
#   it_kill_child WHAT ...  SIGKILL it, wait for its restart and for writes
#   it_etcd_start ...       Debian's etcd with the same flags (IT_ETCD_PORT),
#                           from a snapshot if asked
#   it_wait_healthy PORT    until /health says true and a gRPC get answers
#                           (as IT_AUTH=user:password when set)
#   it_member_answers PORT LOG WHAT   the same as a check, the log shown if not
#   it_bg OUT CMD...        a tool in the background, output in OUT, tracked
#   it_until, it_wait_*     polling with a deadline, never a fixed sleep
#   it_build_go_tool NAME PKG  tests/tools/NAME, built with Debian's Go packages
#   it_build_kvclient       tests/tools/kvclient, built with Debian's clientv3
#   it_kv_start / it_kv_stop / it_kv_val / it_kv_are / it_kv_fig /
#   it_kv_show              run it, read it (a count not printed fails)
#   it_leads EP, it_same_state EP...   a member leads; members agree (every
#                           one answers, all the same); it_agreed MS waits
#                           for that and shows the answers
#   it_cl_proxy LABEL       cluster peers behind tests/integration/peerproxy.py
#   it_cl_init, it_cl_start ...   cluster members of either kind, their
#                           etcdctl (it_cl_ctl, it_cl_replies),
#                           leader, their stop; it_status, it_member_names
#   it_hash EP              Maintenance.Hash and its header revision
#   it_gw_token, it_gw_call     a token from the JSON gateway, a call with it
#   it_mkcert DIR NAME ...  a P-256 key and certificate made with openssl
#   it_dns_start LOG [RECORD...]   a name server of the test's own (SRV and
#                           A records, or one that never answers)
#   it_same_hashkv EP..., it_same_hash EP...   HashKV, Maintenance.Hash agree
#   it_acked_at EP PREFIX ACKS N   no acknowledged put lost
#   it_elected_after LOG MS ms from MS to a leader elected in LOG
#   it_parts PART...        the test's independent parts, run at once
#   check / ok / fail / it_summary   counted assertions
# Every process started here is registered and, at exit, killed by pid,
# and only while it still runs a command line naming this test's dirs or
# is one of its parts (it_parts) or started by one (pids get reused). Run
# on its own (it sits in the folder the tests are collected from), it
# checks its own functions.
set -euo pipefail
export ETCDCTL_API=3

IT_SRC=${CETCD_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
IT_BUILD=${CETCD_BUILD:-$IT_SRC/build}
IT_BIN=${CETCD_BIN:-$IT_BUILD/bin}

it_checks=0
it_failures=0
it_pids=()
it_part_pids=() # it_parts's, in it_pids too
it_on_exit=()

ok() {
	it_checks=$((it_checks + 1))
	echo "ok   - $*"
}
fail() {
	it_checks=$((it_checks + 1))
	it_failures=$((it_failures + 1))
	echo "FAIL - $*"
}
# check "description" command...: ok when the command succeeds.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}
# Prints the totals; the test's exit status (0 only when all passed and
# at least one check ran).
it_summary() {
	it_summarized=1
	echo "$it_checks checks, $it_failures failed"
	((it_failures == 0 && it_checks > 0))
}
it_skip() {
	echo "SKIP: $*"
	exit 77
}
it_now_ms() { date +%s%3N; }
# it_fresh_seed: a fresh seed for tests/fault/run.sh's -s (soak.sh's
# when given none, fault_short.sh's runs), from /dev/urandom and below
# 2^31, as run.sh draws its own.
it_fresh_seed() { echo $(($(od -An -N4 -tu4 /dev/urandom) % 2147483648)); }

# ------------------------------------------------------------ requirements
# it_need_program NAME [WHY]: exit 77 unless NAME is on the PATH; WHY says
# what it is for or where it comes from ("Debian package curl").
it_need_program() {
	command -v "$1" >/dev/null || it_skip "$1 is not installed${2:+ ($2)}"
}
it_need_cetcd() {
	local p
	for p in cetcd raftd stored gatewayd; do
		[[ -x $IT_BIN/$p ]] || it_skip "$IT_BIN/$p is not built"
	done
	it_need_program python3 "to find free ports"
	it_need_program curl "to ask /health, Debian package curl"
	[[ -d /dev/shm && -w /dev/shm ]] || it_skip "/dev/shm is not writable"
}
it_need_etcdctl() {
	it_need_program etcdctl "Debian package etcd-client"
	local v
	v=$(etcdctl version 2>&1) || true
	v=${v%%$'\n'*}
	[[ $v == "etcdctl version: 3.4."* ]] || it_skip "etcdctl is not version 3.4: $v"
}
it_need_etcd() {
	it_need_program etcd "Debian package etcd-server"
}
# it_mount_ns WHY "$@": the test again, from its start, in a private mount
# namespace of its own (unshare -m), so that what it mounts is its alone;
# returns once in it. Exits 77 when not root (WHY: what the mounts are
# for) or when no such namespace can be made here.
it_mount_ns() {
	[[ -z ${IT_MOUNT_NS:-} ]] || return 0
	[[ $(id -u) == 0 ]] || it_skip "$1 needs root"
	shift
	it_need_program unshare "Debian package util-linux"
	unshare -m --propagation private true 2>/dev/null ||
		it_skip "cannot make a private mount namespace here (unshare -m)"
	IT_MOUNT_NS=1 exec unshare -m --propagation private bash "$0" "$@"
}
# it_tmpfs DIR SIZE: a tmpfs of SIZE (mount's size=, e.g. 8m) made at DIR
# (in it_mount_ns's namespace), unmounted at exit.
it_tmpfs() {
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2,mode=0700" tmpfs "$1"
	it_on_exit+=("umount -l '$1'")
}

# ------------------------------------------------------------ setup, exit
# it_init NAME: IT_TMP (logs, data dirs) and IT_RT (runtime dirs, on tmpfs).
it_init() {
	IT_TMP=$(mktemp -d "/tmp/cetcd-$1.XXXXXX")
	IT_RT=$(mktemp -d "/dev/shm/cetcd-$1.XXXXXX")
	trap it_cleanup EXIT
	# where the last command failed outside a conditional: in this shell
	# that is what set -e stops on (in a subshell it is lost with it)
	set -E
	trap 'it_err_at=${BASH_SOURCE[0]##*/}:$LINENO' ERR
}

# Registers pid $1 to be killed at exit.
it_track() { it_pids+=("$1"); }

# it_bg OUT CMD [ARG...]: CMD in the background, its output (stdout and
# stderr) in OUT, registered to be killed at exit; its pid in IT_BG_PID.
it_bg() {
	local out=$1
	shift
	"$@" >"$out" 2>&1 &
	IT_BG_PID=$!
	it_track "$IT_BG_PID"
}

# Whether process $1 is gone (or a zombie nobody reaped yet).
it_gone() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	[[ -z $st || $st == Z* ]]
}

# it_until MS COMMAND...: runs COMMAND every 20 ms until it succeeds
# (0) or MS milliseconds passed (1).
it_until() {
	local deadline=$(($(it_now_ms) + $1))
	shift
	while true; do
		"$@" && return 0
		(($(it_now_ms) < deadline)) || return 1
		sleep 0.02
	done
}

# Waits up to $2 ms for process $1 to be gone.
it_wait_gone() { it_until "$2" it_gone "$1"; }

# Whether process $1 still runs a command line naming this test's dirs,
# or, once the test ran parts (it_parts), has IT_PART_OF=IT_TMP in its
# environment: a part, or a process it started. (never true while either
# dir is unset: an empty pattern matches every process of the machine)
it_ours() {
	[[ -n ${IT_TMP:-} && -n ${IT_RT:-} ]] || return 1
	{ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -e "$IT_TMP" -e "$IT_RT" && return 0
	((${#it_part_pids[@]})) &&
		{ tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | grep -qxF "IT_PART_OF=$IT_TMP"
}

it_cleanup() {
	local rc=$? p c ms
	it_stopped_early "$rc"
	for c in "${it_on_exit[@]}"; do
		eval "$c" || true
	done
	for p in "${it_pids[@]}"; do
		if it_ours "$p"; then
			# the launcher first: it stops its children in order
			kill -CONT "$p" 2>/dev/null || true
			kill -TERM "$p" 2>/dev/null || true
		fi
	done
	for p in "${it_pids[@]}"; do
		# a part stops what it started, then looks through every
		# process for its own, which takes seconds on a busy machine
		ms=5000
		[[ " ${it_part_pids[*]} " != *" $p "* ]] || ms=60000
		if it_ours "$p" && ! it_wait_gone "$p" "$ms"; then
			kill -9 "$p" 2>/dev/null || true
		fi
	done
	# a child the launcher started after it was registered; never this
	# shell or one that runs it (their command lines may name the dirs)
	local mine=" $$ " up=$$
	while up=$(awk '/^PPid:/ { print $2 }' "/proc/$up/status" 2>/dev/null) && ((up > 1)); do
		mine+="$up "
	done
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		if [[ $mine != *" $p "* ]] && it_ours "$p"; then
			kill -9 "$p" 2>/dev/null || true
		fi
	done
	if [[ ${IT_KEEP:-0} == 1 ]]; then
		echo "kept $IT_TMP and $IT_RT"
	else
		rm -rf "$IT_TMP" "$IT_RT"
	fi
}

# Called first thing at exit with the exit status: when a command failed
# outside a check (set -e) or the test exited before it_summary, says
# which command and where, or the log would end at the last check that
# passed.
it_stopped_early() {
	[[ $1 != 0 && $1 != 77 && -z ${it_summarized:-} ]] || return 0
	local i from=
	# frame 0 is this function, 1 it_cleanup, 2 the function the shell
	# stopped in (its line is it_err_at's): the callers follow
	for ((i = 3; i < ${#FUNCNAME[@]}; i++)); do
		from+=" ${FUNCNAME[i]}:${BASH_LINENO[i - 1]}"
	done
	echo "FAIL - ${0##*/} stopped (exit $1) before its summary: '$BASH_COMMAND'" \
		"at ${it_err_at:-?} in ${FUNCNAME[2]:-main}${from:+, called from$from}"
}

# it_parts PART...: the test script run again once per PART (its words
# are that run's arguments), all at once, each a process of its own with
# its own it_init dirs, checks, summary and cleanup; then each one's
# output in turn, and its checks and failures counted here. A part that
# exits other than 0 with no failed check counted (one stopped before its
# summary) fails here too. For parts that are independent of each other and spend their
# time waiting (lease TTLs, elections), so that they need not wait in turn.
# The parts are this test's processes (it_ours: their environment names
# its dir, and that of whatever they start): a test that ends before
# them (a signal, a failure) stops them at exit, and their cleanup what
# they started.
it_parts() {
	local part k rc line n m
	local -a pids=()
	for part in "$@"; do
		# shellcheck disable=SC2086 # the part's words
		IT_PART_OF=$IT_TMP bash "$0" $part >"$IT_TMP/part.${#pids[@]}.out" 2>&1 &
		pids+=($!)
		it_part_pids+=($!)
		it_track "$!"
	done
	for k in "${!pids[@]}"; do
		rc=0
		wait "${pids[k]}" || rc=$?
		cat "$IT_TMP/part.$k.out"
		line=$(grep -E '^[0-9]+ checks, [0-9]+ failed$' "$IT_TMP/part.$k.out" | tail -n 1) || true
		n=0 m=0
		[[ -z $line ]] || read -r n _ m _ <<<"$line"
		it_checks=$((it_checks + n))
		it_failures=$((it_failures + m))
		# (a part whose failed checks were counted has said why)
		((rc == 0 || m > 0)) || fail "part '${*:k+1:1}' exited $rc"
	done
}

# it_free_ports N: N distinct free loopback ports on one line; fails,
# printing nothing, when it cannot find N.
#
# A port found free is released before the member binds it, so the
# kernel must not hand it to anyone meanwhile: the ports come from below
# the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which
# the kernel never picks for a connect() or a bind() to port 0, where
# ports it picked itself would be its next candidates for any program's
# outgoing connection. Among the tests that run at once, a port is
# reserved for an hour by a file named after it in IT_PORT_DIR (default
# /tmp/cetcd-it-ports), created exclusively, so two tests never pick the
# same one. IT_PORT_RANGE="LO HI" overrides the range (HI excluded).
it_free_ports() {
	python3 - "$1" "${IT_PORT_DIR:-/tmp/cetcd-it-ports}" "${IT_PORT_RANGE:-}" <<'EOF'
import errno, os, random, socket, sys, time
want, pdir, rng = int(sys.argv[1]), sys.argv[2], sys.argv[3].split()
if rng:
    lo, hi = int(rng[0]), int(rng[1])
else:
    eph = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    lo, hi = 10000, eph
    if hi - lo < 1000:
        sys.exit("it_free_ports: the ephemeral range starts at %d, too low to pick below it" % eph)
os.makedirs(pdir, exist_ok=True)
def reserve(port):
    path = os.path.join(pdir, str(port))
    try:
        if time.time() - os.stat(path).st_mtime < 3600:
            return False
        os.unlink(path)  # a stale reservation
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True
def free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
got = []
cand = [p for p in range(lo, hi) if p not in (2379, 2380)]
random.shuffle(cand)
for port in cand:
    if len(got) == want:
        break
    if free(port) and reserve(port):
        if free(port):
            got.append(port)
if len(got) < want:
    sys.exit("it_free_ports: %d of %d free ports in [%d, %d)" % (len(got), want, lo, hi))
print(*got)
EOF
}

# ------------------------------------------------------------ waiting
# Lines of file $1 matching the extended regex $2.
it_count() { grep -cE -- "$2" "$1" 2>/dev/null || true; }

it_log_has() { (($(it_count "$1" "$2") >= $3)); }
it_has_lines() { (($(it_lines "$1") >= $2)); }
# it_healthy PORT: /health says true and a linearizable get answers, as
# user IT_AUTH (user:password) when that is set: a member with auth
# enabled refuses a get without a user.
# PORT may also be HOST:PORT (a member on another address).
it_healthy() {
	local h ep=$1
	[[ $ep == *:* ]] || ep=127.0.0.1:$ep
	h=$(curl -s --max-time 2 "http://$ep/health" 2>/dev/null) || return 1
	[[ $h == *'"health":"true"'* ]] &&
		etcdctl --endpoints "$ep" --dial-timeout 1s --command-timeout 2s \
			${IT_AUTH:+"--user=$IT_AUTH"} get health-probe >/dev/null 2>&1
}

# Waits up to $3 seconds until file $1 has at least $4 (default 1) lines
# matching $2.
it_wait_log() {
	it_until $(($3 * 1000)) it_log_has "$1" "$2" "${4:-1}" && return 0
	echo "  (waited $3 s for ${4:-1} line(s) matching $2 in $1)"
	return 1
}

# Waits up to $3 seconds until file $1 has at least $2 lines.
it_wait_lines() {
	it_until $(($3 * 1000)) it_has_lines "$1" "$2" && return 0
	echo "  (waited $3 s for $2 lines in $1, have $(it_lines "$1"))"
	return 1
}

# it_wait_healthy PORT [SECS]: until /health on the client port says true
# and a linearizable get through gRPC answers (default 20 s).
it_wait_healthy() {
	it_until $((${2:-20} * 1000)) it_healthy "$1" && return 0
	echo "  (port $1 not healthy after ${2:-20} s)"
	return 1
}

# it_member_answers PORT LOG WHAT [SECS]: check "WHAT" that the member on
# client port PORT becomes healthy (it_wait_healthy); when it does not,
# shows the end of its LOG. Returns 1 then.
it_member_answers() {
	if it_wait_healthy "$1" "${4:-60}"; then
		ok "$3"
		return 0
	fi
	fail "$3"
	tail -n 20 "$2"
	return 1
}

# ------------------------------------------------------------ cetcd
# it_cetcd_start NAME DATA_DIR LOG [launcher flags...]: starts the launcher
# in the background on fresh ports, or on IT_CPORT/IT_PPORT when set
# (a restart on the same member), with a runtime dir of its own under
# IT_RT. Sets IT_CETCD_PID, IT_CPORT, IT_PPORT, IT_CETCD_LOG, and
# IT_CETCD_ARGS (the flags, for a restart).
it_cetcd_start() {
	local name=$1 data=$2 log=$3
	shift 3
	if [[ -z ${IT_CPORT:-} ]]; then
		read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
	fi
	local rt="$IT_RT/$name"
	mkdir -p "$rt"
	chmod 700 "$rt"
	IT_CETCD_ARGS=(--name "$name" --data-dir "$data" --runtime-dir "$rt"
		--listen-client-urls "http://127.0.0.1:$IT_CPORT"
		--advertise-client-urls "http://127.0.0.1:$IT_CPORT"
		--listen-peer-urls "http://127.0.0.1:$IT_PPORT"
		--initial-advertise-peer-urls "http://127.0.0.1:$IT_PPORT"
		--initial-cluster "$name=http://127.0.0.1:$IT_PPORT" "$@")
	it_cetcd_restart "$log"
}

# Restarts the member with the flags of the last it_cetcd_start (same
# ports, data and runtime dir), logging to $1.
it_cetcd_restart() {
	IT_CETCD_LOG=$1
	"$IT_BIN/cetcd" "${IT_CETCD_ARGS[@]}" 2>>"$IT_CETCD_LOG" &
	IT_CETCD_PID=$!
	it_track "$IT_CETCD_PID"
}

# Stops the member with SIGTERM; returns the launcher's exit status (124
# when it is still there after 15 s, then it is killed).
it_cetcd_stop() {
	local st=0
	kill -TERM "$IT_CETCD_PID" 2>/dev/null || true
	if ! it_wait_gone "$IT_CETCD_PID" 15000; then
		kill -9 "$IT_CETCD_PID" 2>/dev/null || true
		wait "$IT_CETCD_PID" 2>/dev/null || true
		return 124
	fi
	wait "$IT_CETCD_PID" || st=$?
	return "$st"
}

# SIGKILL of the launcher; waits (5 s each) until its daemons are gone
# with it, and fails when one is still there.
it_cetcd_kill() {
	local kids p alive=0
	mapfile -t kids < <(pgrep -P "$IT_CETCD_PID")
	kill -9 "$IT_CETCD_PID"
	wait "$IT_CETCD_PID" 2>/dev/null || true
	for p in "${kids[@]}"; do it_wait_gone "$p" 5000 || alive=$((alive + 1)); done
	((alive == 0 && ${#kids[@]} > 0))
}

# it_cetcd_kill_restart ACKS WRITER OUT LOG: SIGKILL of the launcher while
# kvclient WRITER (started by it_kv_start, its output OUT) appends to ACKS.
# Checks that every process dies with it, that the member started again
# (it_cetcd_restart, logging to LOG) answers on its data, that the writers
# get 200 more acknowledgements, and that they saw no violation (WRITER
# is stopped then).
it_cetcd_kill_restart() {
	local acks=$1 writer=$2 out=$3 log=$4 at
	at=$(it_lines "$acks")
	check "SIGKILL of the launcher (at $at acks) takes every process with it" it_cetcd_kill
	it_cetcd_restart "$log"
	check "the member starts again on the same data" it_wait_healthy "$IT_CPORT" 30
	check "and the writers get acknowledgements again" it_wait_lines "$acks" $((at + 200)) 30
	check "the writers saw no violation" it_kv_stop "$writer" "$out"
}

# it_cetcd_child WHAT: the pid of the launcher's child WHAT (raftd, stored,
# gatewayd-N); fails when there is none right now (being restarted).
it_cetcd_child() {
	local p args
	for p in $(pgrep -P "$IT_CETCD_PID" 2>/dev/null); do
		args=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
		case $1 in
		gatewayd-*)
			[[ $args == */gatewayd\ --gateway-index=${1#gatewayd-}\ * ]] && { echo "$p"; return 0; } ;;
		*)
			[[ $args == */$1\ * ]] && { echo "$p"; return 0; } ;;
		esac
	done
	return 1
}

it_new_child() {
	local p
	p=$(it_cetcd_child "$1") && [[ $p != "$2" ]] && echo "$p"
}

# it_wait_child WHAT OLD_PID SECS: waits until the launcher runs WHAT with
# another pid than OLD_PID; prints the new pid.
it_wait_child() { it_until $(($3 * 1000)) it_new_child "$1" "$2"; }

# it_kill_child WHAT ACKS MORE: SIGKILLs the launcher's WHAT, then waits
# until the launcher runs a new WHAT and ack file ACKS (a kvclient writer
# appends to it) grew by MORE lines, 30 s at most each; says how long it
# took. Counts kills in IT_KILLS.
IT_KILLS=0
it_kill_child() {
	local what=$1 acks=$2 more=$3 pid newpid at t0
	pid=$(it_cetcd_child "$what") || {
		echo "  (no $what runs)"
		return 1
	}
	at=$(it_lines "$acks")
	t0=$(it_now_ms)
	kill -9 "$pid"
	IT_KILLS=$((IT_KILLS + 1))
	newpid=$(it_wait_child "$what" "$pid" 30) || {
		echo "  (the launcher did not start $what again after SIGKILL of $pid)"
		return 1
	}
	it_wait_lines "$acks" $((at + more)) 30 || return 1
	echo "  SIGKILL of $what at $at acknowledgements: pid $pid -> $newpid, $more more after $(($(it_now_ms) - t0)) ms"
}

# it_crashrevert MODE SEED DIR...: tests/tools/crashrevert --mode MODE
# (drop, random, keep) on each file with a crash journal under DIRs
# (the fault backend's crashlog item, base/diskio/diskio.h), with seeds
# SEED, SEED+1, ... a file, each journal removed after; its lines shown
# indented. IT_REVERTED is the number of files; 1 when crashrevert fails.
it_crashrevert() {
	local mode=$1 s=$2 j
	shift 2
	IT_REVERTED=0
	while IFS= read -r j; do
		"$IT_BUILD/tests/crashrevert" --mode "$mode" --seed "$s" "$j" "${j%.crashlog}" |
			sed 's/^/    /' || return 1
		rm -f "$j"
		IT_REVERTED=$((IT_REVERTED + 1))
		s=$((s + 1))
	done < <(find "$@" -name '*.crashlog' 2>/dev/null)
}

# ------------------------------------------------------------ clusters
# it_leads EP: the member at client endpoint EP says it leads.
it_leads() {
	ETCDCTL_API=3 etcdctl --dial-timeout 500ms --command-timeout 5s --endpoints "$1" \
		endpoint status -w json 2>/dev/null | python3 -c 'import json, sys
d = json.load(sys.stdin)[0]["Status"]
sys.exit(0 if d["leader"] != 0 and d["leader"] == d["header"]["member_id"] else 1)' 2>/dev/null
}

# it_all_same REGEX ASK EP...: ASK EP prints the member's answer (one
# line) for each EP; true when every EP, two at least, answered with a
# line matching REGEX (anchored) and all answers are the same. A member
# that does not answer, or answers something else, fails it: "agree"
# means N answers for N members. IT_AGREE holds the last call's answers,
# a line "EP ANSWER" each (it_agreed shows them).
it_all_same() {
	local re=$1 ask=$2 ep a good=()
	shift 2
	IT_AGREE=
	for ep in "$@"; do
		a=$("$ask" "$ep" 2>/dev/null) || a=
		if [[ $a =~ ^$re$ ]]; then
			good+=("$a")
		else
			a="no well-formed answer (${a:-nothing})"
		fi
		IT_AGREE+="$ep $a"$'\n'
	done
	IT_AGREE=${IT_AGREE%$'\n'}
	(($# >= 2 && ${#good[@]} == $#)) && [[ $(printf '%s\n' "${good[@]}" | sort -u | wc -l) == 1 ]]
}

# it_agreed MS CHECK EP...: it_until MS CHECK EP... (it_same_state or
# it_same_hashkv), then the answers of its last try, indented; its status.
it_agreed() {
	local ms=$1 st=0
	shift
	it_until "$ms" "$@" || st=$?
	sed 's/^/    /' <<<"$IT_AGREE"
	return "$st"
}

# it_state_of EP: "revision raft-index" of the member at EP.
it_state_of() {
	etcdctl --dial-timeout 2s --command-timeout 5s --endpoints "$1" endpoint status -w json |
		python3 -c 'import json,sys; d=json.load(sys.stdin)[0]["Status"]; print(d["header"]["revision"], d["raftIndex"])'
}

# it_same_state EP...: every member answers with its store revision and
# raft index, and they are the same (it_all_same).
it_same_state() { it_all_same '[1-9][0-9]* [1-9][0-9]*' it_state_of "$@"; }

# it_elected_after LOG MS: ms from MS (epoch ms) to the first "elected
# leader" line in LOG logged after it (empty when there is none yet).
# LOG is cetcd's or etcd's with --logger zap (JSON lines, "ts" in UTC).
it_elected_after() { it_logged_after "$1" "$2" '"msg":"raft.node:' "elected leader"; }

# it_logged_after LOG T0 TEXT...: ms from T0 (it_now_ms) to the first line
# of LOG at or after T0 that holds every TEXT; nothing if none.
it_logged_after() {
	python3 - "$@" <<'EOF'
import datetime, json, sys
t0 = int(sys.argv[2])
for line in open(sys.argv[1], errors="replace"):
    if not all(t in line for t in sys.argv[3:]):
        continue
    try:
        ts = json.loads(line)["ts"]
    except ValueError:
        continue
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    ms = int(t.timestamp() * 1000)
    if ms >= t0:
        print(ms - t0)
        break
EOF
}

# it_hashkv_of EP: "hash header-revision" of HashKV at the member at EP
# (as IT_AUTH when set, as it_healthy).
it_hashkv_of() {
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$1" ${IT_AUTH:+"--user=$IT_AUTH"} \
		endpoint hashkv -w json |
		python3 -c 'import json,sys; d=json.load(sys.stdin)[0]["HashKV"]; print(d["hash"], d["header"]["revision"])'
}

# it_same_hashkv EP...: every member answers HashKV, and all report the
# same hash and header revision (it_all_same).
it_same_hashkv() { it_all_same '[0-9]+ [1-9][0-9]*' it_hashkv_of "$@"; }

# it_hash EP: Maintenance.Hash as "hash header_revision", through curl over
# h2c with an empty HashRequest (EP is host:port); fails, printing
# nothing, unless the answer is one gRPC message with a header revision.
it_hash() {
	printf '\0\0\0\0\0' >"$IT_TMP/hash.$$.req"
	curl -s --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
		--data-binary @"$IT_TMP/hash.$$.req" -o "$IT_TMP/hash.$$.resp" \
		"http://$1/etcdserverpb.Maintenance/Hash" || return 1
	python3 - "$IT_TMP/hash.$$.resp" <<'EOF'
import struct, sys
r = open(sys.argv[1], "rb").read()
if len(r) < 5 or r[0] != 0 or struct.unpack(">I", r[1:5])[0] != len(r) - 5:
    sys.exit("not one gRPC message (%d bytes)" % len(r))
b = r[5:]
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i
def fields(b):
    i, out = 0, {}
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 0:
            v, i = varint(b, i)
        else:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        out[tag >> 3] = v
    return out
m = fields(b)
rev = fields(m.get(1, b"")).get(3, 0)
if not rev:
    sys.exit("no header revision")
print(m.get(2, 0), rev)
EOF
}

# it_same_hash EP...: every member answers Maintenance.Hash (it_hash), and
# all report the same hash and header revision (it_all_same).
it_same_hash() { it_all_same '[0-9]+ [1-9][0-9]*' it_hash "$@"; }

# it_acked_at EP PREFIX ACKFILES N: kvclient check through EP finds all N
# acknowledged puts of ACKFILES (comma-separated) under PREFIX, with their
# values and mod revisions, and no violation: it exits 0, says it read N
# acknowledgements, found N, and counted no violation. N is 1 at least (no
# puts: nothing to find).
it_acked_at() {
	local out st=0
	out=$IT_TMP/acked.$(it_now_ms).$RANDOM
	"$KVCLIENT" check -endpoint "$1" -prefix "$2" -acks "$3" >"$out" 2>&1 || st=$?
	it_kv_show "$out" '^violation ' | head -5
	if ((st == 0 && $4 > 0)) && grep -qx 'violations 0' "$out" &&
		[[ $(it_kv_val "$out" acks)/$(it_kv_val "$out" acks-found) == "$4/$4" ]]; then
		return 0
	fi
	# what the check said otherwise (a read that failed, say), for the log
	echo "    check: exit $st, $4 acknowledgements expected"
	grep -v '^violation ' "$out" | tail -n 5 | sed 's/^/    check: /' || true
	return 1
}

# it_gw_token EP USER PASSWORD: the token the JSON gateway's Authenticate
# at EP gives (nothing when it gives none).
it_gw_token() {
	curl -s -m 5 "http://$1/v3/auth/authenticate" -d "{\"name\":\"$2\",\"password\":\"$3\"}" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("token",""))'
}

# it_gw_call EP TOKEN PATH BODY: the JSON gateway's answer to BODY at PATH
# with TOKEN in Authorization: its count, else its message, its error, or
# "none".
it_gw_call() {
	curl -s -m 5 -H "Authorization: $2" "http://$1$3" -d "$4" |
		python3 -c 'import json,sys
m = json.load(sys.stdin)
print(m.get("count") or m.get("message") or m.get("error") or "none")'
}

# ------------------------------------------------------------ etcd
# it_etcd_start NAME DATA_DIR LOG [SNAPSHOT [flags...]]: Debian's etcd,
# started fresh with the flags it_cetcd_start gives cetcd and any more
# given, on ports of its own; with SNAPSHOT (not ""), DATA_DIR is first
# made from it by `etcdctl snapshot restore` (its output in LOG.restore;
# a failed restore returns 1). Sets
# IT_ETCD_PID, IT_ETCD_PORT and IT_ETCD_PPORT.
it_etcd_start() {
	local name=$1 data=$2 log=$3 snap=${4:-} extra=("${@:5}")
	read -r IT_ETCD_PORT IT_ETCD_PPORT < <(it_free_ports 2)
	if [[ -n $snap ]]; then
		etcdctl snapshot restore "$snap" --skip-hash-check --name "$name" --data-dir "$data" \
			--initial-cluster "$name=http://127.0.0.1:$IT_ETCD_PPORT" \
			--initial-advertise-peer-urls "http://127.0.0.1:$IT_ETCD_PPORT" >"$log.restore" 2>&1 ||
			{ echo "  (snapshot restore of $snap failed: $(tail -1 "$log.restore"))"; return 1; }
	fi
	it_bg "$log" etcd --name "$name" --data-dir "$data" \
		--listen-client-urls "http://127.0.0.1:$IT_ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$IT_ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$IT_ETCD_PPORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$IT_ETCD_PPORT" \
		--initial-cluster "$name=http://127.0.0.1:$IT_ETCD_PPORT" "${extra[@]}"
	IT_ETCD_PID=$IT_BG_PID
}

# it_same_on_both FN: FN PORT run against the cetcd member (IT_CPORT) and
# the etcd member (IT_ETCD_PORT), printing into $IT_TMP/cetcd.out and
# $IT_TMP/etcd.out "> command" lines and what each printed; a check that
# both printed the same (the diff shown otherwise).
it_same_on_both() {
	local fn=$1 who port
	for who in cetcd etcd; do
		port=$IT_CPORT
		[[ $who == etcd ]] && port=$IT_ETCD_PORT
		"$fn" "$port" >"$IT_TMP/$who.out"
	done
	if diff -u "$IT_TMP/etcd.out" "$IT_TMP/cetcd.out"; then
		ok "the $(grep -c '^>' "$IT_TMP/cetcd.out") commands print what they print on etcd"
	else
		fail "the commands print what they print on etcd (diff above)"
	fi
}

# it_etcd_on_cetcd LOG [etcd flags...]: Debian's etcd on the data dir,
# name and ports of the last it_cetcd_start (the same URLs: the same
# member and cluster ids), logging to LOG. Sets IT_ETCD_PID.
it_etcd_on_cetcd() {
	local log=$1 name=${IT_CETCD_ARGS[1]} data=${IT_CETCD_ARGS[3]}
	shift
	it_bg "$log" etcd --name "$name" --data-dir "$data" \
		--listen-client-urls "http://127.0.0.1:$IT_CPORT" \
		--advertise-client-urls "http://127.0.0.1:$IT_CPORT" \
		--listen-peer-urls "http://127.0.0.1:$IT_PPORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$IT_PPORT" \
		--initial-cluster "$name=http://127.0.0.1:$IT_PPORT" "$@"
	IT_ETCD_PID=$IT_BG_PID
}

# ------------------------------------------------------------ cluster members
# it_cl_init TOKEN COUNT [PREFIX [STEM]]: free loopback ports for COUNT
# members named PREFIX0, PREFIX1, ... (default x0, x1, ...), a client and
# a peer port each (IT_CL_CPORT[I], IT_CL_PPORT[I]; a test may set others
# before the members start). Member I keeps its data in IT_TMP/STEM<name>,
# its runtime dir in IT_RT/STEM<name> and its log in IT_CL_LOG[I]
# (IT_TMP/STEM<name>.log; a test may point it elsewhere before a start).
# It advertises the peer URL on IT_CL_APORT[I] (default: its peer port).
# It listens on IT_CL_HOST[I] (default 127.0.0.1) and runs under the
# words of IT_CL_PREFIX[I] when set (say "ip netns exec NS env VAR=..."):
# a test may set both before the members start.
# Members 0, 1 and 2 (or all, when fewer) make the initial cluster,
# IT_CL_INITIAL, with
# --initial-cluster-token TOKEN.
it_cl_init() {
	local i
	IT_CL_TOKEN=$1
	IT_CL_STEM=${4:-}
	IT_CL_NAMES=() IT_CL_CPORT=() IT_CL_PPORT=() IT_CL_APORT=() IT_CL_LOG=() IT_CL_PIDS=()
	IT_CL_HOST=() IT_CL_PREFIX=()
	read -r -a IT_CL_PORTS < <(it_free_ports $((2 * $2)))
	for ((i = 0; i < $2; i++)); do
		IT_CL_NAMES[i]=${3:-x}$i
		IT_CL_CPORT[i]=${IT_CL_PORTS[2 * i]}
		IT_CL_PPORT[i]=${IT_CL_PORTS[2 * i + 1]}
		IT_CL_APORT[i]=${IT_CL_PPORT[i]}
		IT_CL_LOG[i]=$IT_TMP/$IT_CL_STEM${IT_CL_NAMES[i]}.log
	done
	IT_CL_INITIAL=$(it_cl_initial $(seq 0 $((($2 < 3 ? $2 : 3) - 1))))
}
# it_cl_proxy LABEL: after it_cl_init of 3 members, fresh ports with
# each member's peer port behind tests/integration/peerproxy.py (the
# members advertise the proxy's ports, so it can cut them off); its
# control file is IT_CL_CUT, its pid IT_CL_PROXY, its log
# IT_TMP/LABEL.proxy.log. Fails when the proxy does not start in 10 s.
it_cl_proxy() {
	local i ports
	read -r -a ports < <(it_free_ports 9)
	for i in 0 1 2; do
		IT_CL_CPORT[i]=${ports[3 * i]}
		IT_CL_PPORT[i]=${ports[3 * i + 1]}
		IT_CL_APORT[i]=${ports[3 * i + 2]}
	done
	IT_CL_INITIAL=$(it_cl_initial 0 1 2)
	IT_CL_CUT=$IT_TMP/$1.cut
	: >"$IT_CL_CUT"
	python3 "$IT_SRC/tests/integration/peerproxy.py" "$IT_CL_CUT" \
		"${IT_CL_APORT[0]}:${IT_CL_PPORT[0]}" "${IT_CL_APORT[1]}:${IT_CL_PPORT[1]}" \
		"${IT_CL_APORT[2]}:${IT_CL_PPORT[2]}" >"$IT_TMP/$1.proxy.log" 2>&1 &
	IT_CL_PROXY=$!
	it_track "$IT_CL_PROXY"
	it_until 10000 grep -qs '^ready' "$IT_TMP/$1.proxy.log"
}

# it_cl_ep I: member I's client endpoint (host:port); it_cl_purl I: the
# peer URL it advertises; it_cl_log I: its log.
it_cl_ep() { echo "${IT_CL_HOST[$1]:-127.0.0.1}:${IT_CL_CPORT[$1]}"; }
it_cl_purl() { echo "http://${IT_CL_HOST[$1]:-127.0.0.1}:${IT_CL_APORT[$1]}"; }
it_cl_log() { echo "${IT_CL_LOG[$1]}"; }
# it_cl_ctl I ARGS...: etcdctl ARGS at member I (2 s to dial, 10 s a
# command), stdout and stderr without the client's JSON log lines; never
# fails (the output is what tests read).
it_cl_ctl() {
	local i=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$(it_cl_ep "$i")" "$@" \
		</dev/null 2>&1 | grep -v '^{"level"' || true
}
# it_cl_replies I USER:PASSWORD REQUEST...: each etcdctl REQUEST (its
# words, in the shell's quoting) at member I as that user: "> REQUEST",
# then what etcdctl printed.
it_cl_replies() {
	local i=$1 cred=$2 req
	shift 2
	for req in "$@"; do
		echo "> $req"
		eval "it_cl_ctl \"\$i\" --user \"\$cred\" $req"
	done
}
# it_cl_initial I...: --initial-cluster for members I... (name=peer URL).
it_cl_initial() {
	local i s=""
	for i in "$@"; do s+="${s:+,}${IT_CL_NAMES[i]}=$(it_cl_purl "$i")"; done
	echo "$s"
}

# it_cl_start I KIND [flags...]: member I as KIND (cetcd, or Debian's etcd)
# in the background, in the initial cluster IT_CL_INITIAL, its stdout and
# stderr appended to its log; sets IT_CL_PIDS[I]. The flags follow
# (etcd's --logger zap --log-outputs stderr when a test reads etcd's log
# as JSON lines).
# it_cl_join I KIND INITIAL [flags...]: the same for a member added to a
# running cluster: --initial-cluster INITIAL --initial-cluster-state
# existing.
it_cl_start() {
	local i=$1 kind=$2
	shift 2
	it_cl_run "$i" "$kind" --initial-cluster "$IT_CL_INITIAL" "$@"
}
it_cl_join() {
	local i=$1 kind=$2 initial=$3
	shift 3
	it_cl_run "$i" "$kind" --initial-cluster "$initial" --initial-cluster-state existing "$@"
}
it_cl_run() {
	local i=$1 kind=$2 bin extra=() stem=$IT_CL_STEM${IT_CL_NAMES[$1]}
	shift 2
	if [[ $kind == etcd ]]; then
		bin=$(command -v etcd)
	else
		bin=$IT_BIN/cetcd
		mkdir -p "$IT_RT/$stem"
		chmod 700 "$IT_RT/$stem"
		extra=(--runtime-dir "$IT_RT/$stem")
	fi
	# shellcheck disable=SC2086 # the prefix's words
	${IT_CL_PREFIX[i]:-} "$bin" --name "${IT_CL_NAMES[i]}" --data-dir "$IT_TMP/$stem" "${extra[@]}" \
		--listen-client-urls "http://$(it_cl_ep "$i")" \
		--advertise-client-urls "http://$(it_cl_ep "$i")" \
		--listen-peer-urls "http://${IT_CL_HOST[i]:-127.0.0.1}:${IT_CL_PPORT[i]}" \
		--initial-advertise-peer-urls "$(it_cl_purl "$i")" \
		--initial-cluster-token "$IT_CL_TOKEN" "$@" 2>>"${IT_CL_LOG[i]}" >&2 &
	IT_CL_PIDS[i]=$!
	it_track "${IT_CL_PIDS[i]}"
}

# it_cl_answers I [WHAT]: member I answers within 60 s (it_wait_healthy);
# when it does not, fail "WHAT" (default: "member NAME answers") and the
# end of its log are shown, and it returns 1.
it_cl_answers() {
	it_wait_healthy "$(it_cl_ep "$1")" 60 && return 0
	fail "${2:-member ${IT_CL_NAMES[$1]} answers}"
	tail -n 30 "${IT_CL_LOG[$1]}"
	return 1
}

# it_cl_leader [I...]: the first of members I... (default 0, 1 and 2) that
# says it leads; fails when none does.
it_cl_leader() {
	local i
	(($#)) || set -- 0 1 2
	for i in "$@"; do
		it_leads "$(it_cl_ep "$i")" && { echo "$i"; return 0; }
	done
	return 1
}
# it_cl_but I...: members 0, 1 and 2 but I... (a list of indexes).
it_cl_but() {
	local i
	for i in 0 1 2; do
		[[ " $* " == *" $i "* ]] || echo "$i"
	done
}
# it_cl_other I...: the first member that is none of I... (no pipe to
# head: a writer cut off by head's exit fails the pipeline under pipefail).
it_cl_other() {
	local i
	for i in 0 1 2; do
		[[ " $* " == *" $i "* ]] || { echo "$i"; return 0; }
	done
}
# it_cl_current_leader [WHAT]: the leader of members 0, 1 and 2, waiting
# up to 10 s for one (a resumed member may call an election just then);
# when none leads, fail "WHAT" (default "a member leads"), the summary, and
# the test exits.
it_cl_current_leader() {
	if it_until 10000 it_cl_leader >/dev/null; then
		it_cl_leader
		return 0
	fi
	fail "${1:-a member leads}"
	it_summary
	exit 1
}

# it_cl_procs I: member I's processes: etcd, or the launcher and its
# daemons.
it_cl_procs() { echo "${IT_CL_PIDS[$1]}" $(pgrep -P "${IT_CL_PIDS[$1]}" 2>/dev/null || true); }
# it_cl_kill I: SIGKILL to member I and to every process running on its
# data dir.
it_cl_kill() {
	local p
	kill -9 "${IT_CL_PIDS[$1]}" 2>/dev/null || true
	for p in $(pgrep -f -- "--data-dir $IT_TMP/$IT_CL_STEM${IT_CL_NAMES[$1]}( |$)"); do
		kill -9 "$p" 2>/dev/null || true
	done
}
# it_cl_stop I...: SIGTERM to members I..., then SIGKILL to any still
# there after 20 s.
it_cl_stop() {
	local i
	for i in "$@"; do kill -TERM "${IT_CL_PIDS[i]}" 2>/dev/null || true; done
	for i in "$@"; do
		it_wait_gone "${IT_CL_PIDS[i]}" 20000 || kill -9 "${IT_CL_PIDS[i]}" 2>/dev/null || true
		wait "${IT_CL_PIDS[i]}" 2>/dev/null || true
	done
}

# it_mkcert DIR NAME CN ISSUER [EXT]: in DIR, a P-256 key NAME.key and a
# certificate NAME.crt with subject CN, signed by DIR/ISSUER's key with
# the extensions EXT (openssl's extfile lines), or a self-signed CA when
# ISSUER is "self".
it_mkcert() {
	local dir=$1 name=$2 cn=$3 issuer=$4 ext=${5:-}
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
	if [[ $issuer == self ]]; then
		openssl req -x509 -new -key "$dir/$name.key" -subj "/CN=$cn" -days 1 \
			-addext "basicConstraints=critical,CA:TRUE" -out "$dir/$name.crt" 2>/dev/null
		return
	fi
	openssl req -new -key "$dir/$name.key" -subj "/CN=$cn" -out "$dir/$name.csr" 2>/dev/null
	printf '%s\n' "$ext" >"$dir/$name.ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$issuer.crt" -CAkey "$dir/$issuer.key" \
		-CAcreateserial -days 1 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
}

# it_dns_start LOG [RECORD...]: a name server on 127.0.0.53:53 (UDP, in
# the test's own network namespace, where its resolv.conf points), in the
# background; it logs "query NAME TYPE N" to LOG for each query (NAME in
# lower case, N the answers given). A RECORD is "A NAME" (127.0.0.1) or
# "SRV NAME TARGET PORT" (priority and weight 0, in the order given). It
# answers with those, NXDOMAIN for a name it has none of; given no RECORD
# it answers nothing at all (a dead resolver). When it is not ready within
# 10 s: fail, the summary, and the test exits.
it_dns_start() {
	local log=$1
	shift
	cat >"$IT_TMP/dns.py" <<'EOF'
import socket, struct, sys
srv, hosts, args = {}, set(), sys.argv[1:]
while args:
    if args[0] == "A" and len(args) >= 2:
        hosts.add(args[1].lower())
        args = args[2:]
    elif args[0] == "SRV" and len(args) >= 4:
        srv.setdefault(args[1].lower(), []).append((args[2], int(args[3])))
        args = args[4:]
    else:
        sys.exit("it_dns_start: a record is A NAME or SRV NAME TARGET PORT, not %r" % args)
silent = not srv and not hosts
def name(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.53", 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(4096)
    labels, i = [], 12
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace").lower())
        i += 1 + q[i]
    if i + 5 > len(q):
        continue
    qname, qtype = ".".join(labels), struct.unpack(">H", q[i + 1:i + 3])[0]
    question = q[12:i + 5]
    answers = []
    if qtype == 33 and qname in srv:
        for target, port in srv[qname]:
            rd = struct.pack(">HHH", 0, 0, port) + name(target)
            answers.append(name(qname) + struct.pack(">HHIH", 33, 1, 5, len(rd)) + rd)
    elif qtype == 1 and qname in hosts:
        answers.append(name(qname) + struct.pack(">HHIH", 1, 1, 5, 4) + bytes([127, 0, 0, 1]))
    print("query", qname, qtype, len(answers), flush=True)
    if silent:
        continue
    flags = 0x8180 if qname in srv or qname in hosts else 0x8183
    s.sendto(q[:2] + struct.pack(">HHHHH", flags, 1, len(answers), 0, 0) + question + b"".join(answers), peer)
EOF
	it_bg "$log" python3 "$IT_TMP/dns.py" "$@"
	it_until 10000 grep -q '^ready' "$log" && return 0
	fail "the name server starts"
	cat "$log"
	it_summary
	exit 1
}

# it_status EP EXPR: the Python expression EXPR over d, the "Status" of
# `etcdctl endpoint status -w json` at EP; it_member_id EP: the member id
# (hex); it_revision EP: the store revision.
it_status() {
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$1" endpoint status -w json 2>/dev/null |
		python3 -c "import json,sys; d=json.load(sys.stdin)[0]['Status']; print($2)"
}
it_member_id() { it_status "$1" '"%x" % d["header"]["member_id"]'; }
it_revision() { it_status "$1" 'd["header"]["revision"]'; }
# it_member_names EP: the names of the members EP lists, sorted, joined by
# commas ("?" for one not started yet).
it_member_names() {
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$1" member list -w json |
		python3 -c 'import json,sys; print(",".join(sorted(m.get("name") or "?" for m in json.load(sys.stdin)["members"])))'
}

# ------------------------------------------------------------ kvclient
# it_kv_val FILE NAME: the number kvclient printed as "NAME N" (its last
# such line); prints nothing and fails when there is none, so a check
# on it fails on an empty or cut-short output rather than reading 0.
it_kv_val() {
	awk -v n="$2" '{ v = $NF; $NF = "" } $0 == n " " && v ~ /^-?[0-9]+$/ { x = v; f = 1 }
		END { if (!f) exit 1; print x }' "$1"
}

# it_kv_fig FILE NAME: it_kv_val for a figure in a message: "?" when
# kvclient did not print it.
it_kv_fig() { it_kv_val "$1" "$2" 2>/dev/null || echo "?"; }

# it_kv_are FILE NAME OP N [NAME OP N]...: every NAME was printed and its
# value compares with N as test's OP says (-eq, -gt, -ge ...); a missing
# one fails, naming it.
it_kv_are() {
	local f=$1 v
	shift
	while (($# >= 3)); do
		v=$(it_kv_val "$f" "$1") || {
			echo "    ($f has no \"$1 N\" line)"
			return 1
		}
		test "$v" "$2" "$3" || return 1
		shift 3
	done
	(($# == 0))
}

# it_kv_show FILE REGEX: kvclient's lines matching REGEX, indented.
it_kv_show() { grep -E -- "$2" "$1" | sed 's/^/    /' || true; }

# it_lines FILE: its number of lines (0 when it does not exist yet).
it_lines() { { wc -l <"$1"; } 2>/dev/null || echo 0; }

# it_kv_start OUT ARGS...: kvclient ARGS in the background, its output
# to OUT; sets IT_KV_PID.
it_kv_start() {
	local out=$1
	shift
	it_bg "$out" "$KVCLIENT" "$@"
	IT_KV_PID=$IT_BG_PID
}

# it_kv_stop PID OUT [REGEX]: SIGTERM to kvclient PID (started by
# it_kv_start with output OUT); shows its lines matching REGEX (default:
# errors and violations). Returns its exit status, and 0 only when it also
# printed "violations 0": its checks held. Errors with a clean gRPC status
# (a member killed or removed under it) are counted, not violations.
it_kv_stop() {
	local st=0
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" || st=$?
	it_kv_show "$2" "${3:--error |^violation }"
	if ((st == 0)) && ! grep -qx 'violations 0' "$2"; then
		st=1
	fi
	if ((st != 0)); then
		echo "    (kvclient $1 exited $st; its last lines:)"
		tail -n 3 "$2" | sed 's/^/    /'
	fi
	return "$st"
}

# it_build_go_tool NAME PKGDIR: builds tests/tools/NAME (Go, on Debian's
# Go packages) into $IT_BUILD/tests/NAME; exits 77 when Go or etcd's Go
# package PKGDIR (under /usr/share/gocode/src) is missing.
it_build_go_tool() {
	local gopath=/usr/share/gocode
	it_need_program go "Debian package golang-go"
	[[ -d $gopath/src/$2 ]] ||
		it_skip "$2 is missing (Debian package golang-etcd-server-dev)"
	mkdir -p "$IT_BUILD/tests/gocache"
	if ! (cd "$IT_SRC/tests/tools/$1" &&
		GO111MODULE=off GOPATH=$gopath GOCACHE=$IT_BUILD/tests/gocache GOFLAGS='' \
			go build -o "$IT_BUILD/tests/$1" .); then
		echo "FAIL: $1 does not build against $gopath"
		exit 1
	fi
}

# Builds tests/tools/kvclient (on etcd's clientv3) and sets KVCLIENT.
it_build_kvclient() {
	it_build_go_tool kvclient go.etcd.io/etcd/clientv3
	KVCLIENT=$IT_BUILD/tests/kvclient
}

# ------------------------------------------------------------ self-check
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	it_need_program python3 "to find free ports"
	it_init lib
	for f in "$IT_SRC"/tests/integration/*.sh; do
		check "$(basename "$f") parses" bash -n "$f"
	done
	read -r -a ports < <(it_free_ports 8)
	check "it_free_ports gives 8 distinct ports" test "$(printf '%s\n' "${ports[@]}" | sort -u | wc -l)" -eq 8
	check "none of them is etcd's 2379 or 2380" test -z "$(printf '%s\n' "${ports[@]}" | grep -xE '2379|2380')"
	read -r eph _ </proc/sys/net/ipv4/ip_local_port_range
	check "they are below the ephemeral range, which starts at $eph" \
		test "$(printf '%s\n' "${ports[@]}" | sort -n | tail -1)" -lt "$eph"
	read -r -a more < <(it_free_ports 8)
	check "a second call reserves none of the first call's ports" \
		test "$(printf '%s\n' "${ports[@]}" "${more[@]}" | sort -u | wc -l)" -eq 16
	# three ports, the middle one bound by another program: it_free_ports
	# gives the other two, then none (they are reserved)
	python3 - "$IT_TMP/held" <<'EOF' &
import socket, sys, time
for base in range(20000, 30000, 3):
    socks = [socket.socket() for _ in range(3)]
    try:
        for i, s in enumerate(socks):
            s.bind(("127.0.0.1", base + i))
    except OSError:
        continue
    for s in (socks[0], socks[2]):
        s.close()
    socks[1].listen()
    open(sys.argv[1], "w").write("%d\n" % base)
    time.sleep(60)
    break
EOF
	held_pid=$!
	it_track "$held_pid"
	if it_until 10000 test -s "$IT_TMP/held"; then
		read -r base <"$IT_TMP/held"
		two=$(IT_PORT_DIR=$IT_TMP/ports IT_PORT_RANGE="$base $((base + 3))" it_free_ports 2 | tr ' ' '\n' | sort -n | tr '\n' ' ')
		check "it_free_ports skips a port in use: $((base + 1)) of $base..$((base + 2)) (got $two)" \
			test "$two" = "$base $((base + 2)) "
		check "it_free_ports skips reserved ports and fails when too few are left" \
			eval '! IT_PORT_DIR=$IT_TMP/ports IT_PORT_RANGE="$base $((base + 3))" it_free_ports 1 2>/dev/null'
	else
		fail "a listener holds a port for it_free_ports to skip"
	fi
	kill "$held_pid" 2>/dev/null || true
	sleep 0.2 &
	p=$!
	check "it_wait_gone sees a process end" it_wait_gone "$p" 5000
	check "it_fresh_seed prints a number below 2^31" eval '[[ $(it_fresh_seed) =~ ^[0-9]+$ ]] &&
		(($(it_fresh_seed) < 2147483648))'
	# (the cleanup kills every process it_ours names, so an unset dir must
	# name none, this shell included)
	bash -c 'sleep 10; :' ours "$IT_TMP" &
	p=$!
	check "it_ours names a process of this test's" it_ours "$p"
	check "it_ours names none while a dir is unset" eval '! (IT_TMP=; it_ours "$p") && ! (IT_RT=; it_ours "$p")'
	kill "$p"
	printf 'acks 12\nconns gatewayd-0 3\nput-error Unavailable: x 2\n' >"$IT_TMP/kv.out"
	check "it_kv_val reads kvclient's counts" \
		test "$(it_kv_val "$IT_TMP/kv.out" acks)/$(it_kv_val "$IT_TMP/kv.out" "conns gatewayd-0")" = 12/3
	check "it_kv_val prints nothing and fails for a name not printed, a missing file, a line cut short" \
		eval '! v=$(it_kv_val "$IT_TMP/kv.out" nothing) && [[ -z $v ]] &&
			! it_kv_val "$IT_TMP/none" acks 2>/dev/null && printf "violations" >"$IT_TMP/cut.out" &&
			! it_kv_val "$IT_TMP/cut.out" violations && ! it_kv_val /dev/null violations'
	check "it_kv_fig shows a missing figure as ?" \
		test "$(it_kv_fig "$IT_TMP/kv.out" acks)/$(it_kv_fig "$IT_TMP/kv.out" nothing)" = "12/?"
	check "it_kv_are: present values that compare pass" \
		it_kv_are "$IT_TMP/kv.out" acks -eq 12 "conns gatewayd-0" -gt 0
	check "it_kv_are: a value that does not compare, a missing name (also for -eq 0), a dangling argument fail" \
		eval '! it_kv_are "$IT_TMP/kv.out" acks -gt 12 && ! it_kv_are "$IT_TMP/kv.out" violations -eq 0 >/dev/null &&
			! it_kv_are /dev/null violations -eq 0 >/dev/null && ! it_kv_are "$IT_TMP/kv.out" acks -eq'
	check "it_lines counts lines, 0 for a missing file" \
		test "$(it_lines "$IT_TMP/kv.out")/$(it_lines "$IT_TMP/none")" = 3/0
	# kvclient's verdict: a stand-in prints FAKE_LINES and exits FAKE_RC,
	# at once ("check") or at SIGTERM ("write")
	cat >"$IT_TMP/fakekv" <<'EOF'
#!/usr/bin/env bash
end() { printf '%b' "$FAKE_LINES"; exit "$FAKE_RC"; }
[[ $1 == check ]] && end
trap end TERM
echo started
while :; do sleep 0.05; done
EOF
	chmod +x "$IT_TMP/fakekv"
	KVCLIENT=$IT_TMP/fakekv
	export FAKE_LINES FAKE_RC
	# fake_kv RC LINES: a stand-in writer, stopped by it_kv_stop
	fake_kv() {
		FAKE_RC=$1 FAKE_LINES=$2
		it_kv_start "$IT_TMP/fake.out" write
		it_wait_lines "$IT_TMP/fake.out" 1 10 && it_kv_stop "$IT_KV_PID" "$IT_TMP/fake.out" >/dev/null
	}
	# fake_check RC LINES N: it_acked_at with a stand-in check
	fake_check() { FAKE_RC=$1 FAKE_LINES=$2 it_acked_at 127.0.0.1:1 kv acks "$3" >/dev/null; }
	fails() { ! "$@"; }
	check "it_kv_stop: a writer that counted errors but no violation passes" \
		fake_kv 0 'put-error Unavailable: x 3\nviolations 0\n'
	check "it_kv_stop: a writer that saw a violation (exit 1) fails" \
		fails fake_kv 1 'violation writer 0: put acknowledged at revision 5 after 7\nviolations 1\n'
	check "it_kv_stop: a writer that exits 0 without its 'violations 0' fails" fails fake_kv 0 'acks 3\n'
	found='acks 5\nacks-found 5\nviolations 0\n'
	check "it_acked_at: all 5 found, no violation, exit 0 passes" fake_check 0 "$found" 5
	check "it_acked_at: 4 expected but 5 read fails" fails fake_check 0 "$found" 4
	check "it_acked_at: a lost put (4 of 5 found) fails" \
		fails fake_check 1 'violation acknowledged put lost: kv/w000/1\nacks 5\nacks-found 4\nviolations 1\n' 5
	check "it_acked_at: a check that printed nothing fails, also for 0 expected" \
		eval 'fails fake_check 1 "" 5 && fails fake_check 0 "" 0'
	check "it_acked_at: a check with 0 acknowledgements to find fails" \
		fails fake_check 0 'acks 0\nacks-found 0\nviolations 0\n' 0
	# agreement: answers from a table, "-" for a member that does not answer
	declare -A said
	ask() { [[ ${said[$1]} != - ]] && echo "${said[$1]}"; }
	said=([a]="7 12" [b]="7 12" [c]="7 12" [d]="7 13" [e]=- [f]="" [g]="7 12 x")
	agree() { it_all_same '[0-9]+ [0-9]+' ask "$@"; }
	check "it_all_same: three members with the same answer agree" agree a b c
	check "it_all_same: one that differs, one that does not answer, an empty or malformed answer, one member alone: no agreement" \
		eval 'fails agree a b d && fails agree a b e && fails agree a b f && fails agree a g && fails agree a && fails agree'
	check "it_agreed returns the check's status and shows each member's answer" \
		eval '! out=$(it_agreed 100 agree a e) && grep -qx "    e no well-formed answer (nothing)" <<<"$out" &&
			it_agreed 100 agree a b >/dev/null'
	read -r -a dead < <(it_free_ports 2)
	# (the three at once: each waits out etcdctl's command timeout twice)
	dead_fails() { fails "$1" "127.0.0.1:${dead[0]}" "127.0.0.1:${dead[1]}"; }
	all_dead_fail() {
		local f st=0
		local -a pids=()
		for f in it_same_state it_same_hashkv it_same_hash; do
			dead_fails "$f" &
			pids+=($!)
		done
		for f in "${pids[@]}"; do wait "$f" || st=1; done
		return "$st"
	}
	check "it_same_state, it_same_hashkv, it_same_hash fail where nothing listens" all_dead_fail
	# a test that set -e stops outside a check says where, and fails
	cat >"$IT_TMP/stops.sh" <<EOF
source "${BASH_SOURCE[0]}"
it_init lib-stops
check "first" true
inner() { local v; v=\$(false); echo "not reached"; }
outer() { inner; }
[[ \$1 == body ]] && v=\$(grep -c nothing /dev/null)
[[ \$1 == function ]] && outer
[[ \$1 == skip ]] && it_skip "skipped"
it_summary
EOF
	stops() {
		local out rc
		out=$(bash "$IT_TMP/stops.sh" "$1" 2>&1) && rc=0 || rc=$?
		[[ $rc == "$2" ]] && grep -qF -- "$3" <<<"$out"
	}
	check "set -e in a test's body: the command and its line are named" \
		stops body 1 "stopped (exit 1) before its summary: 'v=\$(grep -c nothing /dev/null)' at stops.sh:6 in main"
	check "set -e in a function: its line and its callers are named" \
		stops function 1 "at stops.sh:4 in inner, called from outer:5 main:7"
	check "a skip or a summary says nothing more" \
		eval 'stops skip 77 SKIP && ! stops skip 77 stopped && stops pass 0 "1 checks, 0 failed" && ! stops pass 0 stopped'
	# it_parts: a stand-in test whose parts pass, fail a check, stop
	# before their summary or wait, a process of theirs running
	cat >"$IT_TMP/parts.sh" <<EOF
source "${BASH_SOURCE[0]}"
if ((\$#)); then
	it_init lib-part
	check "part \$1 ran" test "\$1" != bad
	[[ \$1 != stops ]] || false
	if [[ \$1 == waits ]]; then
		bash -c 'sleep 300; :' part-child "\$IT_TMP" &
		it_track \$!
		echo "\$\$ \$! \$IT_TMP" >"$IT_TMP/waits.pids"
		wait
	fi
	it_summary
	exit
fi
it_init lib-parts
it_parts \$PARTS
it_summary
EOF
	# parts RC SUMMARY PART...: the stand-in with those parts exits RC, ends
	# with SUMMARY and shows each part's check in the order given
	parts() {
		local out rc want=$1 sum=$2
		shift 2
		out=$(PARTS="$*" bash "$IT_TMP/parts.sh" 2>&1) && rc=0 || rc=$?
		[[ $rc == "$want" && $(tail -n 1 <<<"$out") == "$sum" ]] &&
			[[ $(grep -oE '^(ok  |FAIL) - part [a-z]+' <<<"$out" | awk '{ print $4 }' | tr '\n' ' ') == "$* " ]]
	}
	check "it_parts: the parts' checks add up, their output in order" parts 0 "3 checks, 0 failed" a b c
	check "it_parts: a part's failed check fails the test" parts 1 "3 checks, 1 failed" a bad c
	check "it_parts: a part stopped before its summary fails the test" \
		parts 1 "2 checks, 1 failed" a stops
	# parts_stopped: the stand-in stopped (SIGTERM) while its part waits;
	# the part, the process it started and the part's dir (its own
	# cleanup ran) are gone then
	parts_stopped() {
		local top part child dir
		PARTS=waits bash "$IT_TMP/parts.sh" >"$IT_TMP/waits.out" 2>&1 &
		top=$!
		it_until 60000 test -s "$IT_TMP/waits.pids" || return 1
		read -r part child dir <"$IT_TMP/waits.pids"
		kill -TERM "$top"
		wait "$top" || true
		it_wait_gone "$part" 20000 && it_wait_gone "$child" 20000 && [[ -n $dir && ! -e $dir ]]
	}
	check "it_parts: a test stopped while a part runs stops the part, which stops what it started" parts_stopped
	it_summary
fi
