# shellcheck shell=bash
# The fault suite's harness (tests/fault/run.sh sources it): a 3-member
# cluster in network namespaces of its own, the nemeses that break it,
# and the run's verdict. The workload and its checkers are faultload's
# (tests/tools/faultload): the harness gives it the endpoints, the seed,
# the duration and the run's dir, and reads its summary line and its
# history (DIR/<workload>.jsonl: call_ns, ret_ns, type, f of each
# operation) beside faults.log (README.md, "Fault suite").
#
# The network (nothing outside the namespaces is touched):
#   namespace FN_BR     a bridge br0 at $FN_NET.1/24; the harness and the
#                       workload run here
#   namespace FN_NS[I]  member I: eth0 at $FN_NET.(11+I), the other end
#                       of the veth (vm<I>) in the bridge
# Nemeses (kinds, as faults.log names them). This is where the kinds
# are listed and described, by group; the groups' lists are the
# FN_KINDS_* below (run.sh's -f takes kinds and groups, and -h prints
# the groups), and README.md and docs/design.md cite this list.
# Network (the group net, FN_KINDS_NET):
#   isolate      a member (the leader 2 times in 3) cut from the other two,
#                both ways; targets "mI | mJ mK"
#   split        the same with the member drawn evenly (a minority of one)
#   bridge       two members cut from each other, the third sees both;
#                targets "mI | mJ | mK" (mJ in the middle)
#   oneway       every packet from one member to another dropped, the
#                other way untouched; targets "mI -> mJ"
#   loss         a share of a member's packets dropped, both ways;
#                targets "mI P%"
#   reorder      a share of a member's packets through a 64 kbit/s lane,
#                so they arrive behind later ones; targets "mI P%"
#   slow         a member's link at a low rate (queueing delay, tail
#                drops); targets "mI RATE"
#   clientcut    a member's client port cut from the bridge's namespace
#                (the workload's clients, the harness's etcdctl), both
#                ways, its peers untouched: the member stays in the
#                cluster, its clients time out and fail over (faultload's
#                worker.go); targets "mI"
# Processes (the group proc, FN_KINDS_PROC):
#   kill         SIGKILL of a whole member, restarted on its data dir
#   pause        SIGSTOP of a whole member, then SIGCONT
#   kill-daemon  SIGKILL of one of a cetcd member's daemons (raftd,
#                stored, gatewayd-N); the launcher restarts it, the stop
#                line is logged once it runs again
#   pause-daemon SIGSTOP of one daemon, then SIGCONT
# In the group all (FN_KINDS_ALL: net, proc and these two):
#   disk         the next fdatasync of a cetcd member's WAL or db (which
#                one is drawn per member at start) fails with EIO, through
#                the disk I/O layer's test fault backend
#                (CETCD_TEST_DISKIO_FAULT, base/diskio/diskio.h): the
#                daemon fails the file for good and the launcher restarts
#                it; targets "mI wal|db" ("mI both" in a run with
#                crash: whichever syncs first)
#   clock        a member's wall clock stepped by +-N s, then back: a
#                cetcd member's through tests/tools/clockstep, preloaded
#                (libfaketime cannot start in a program linked with
#                jemalloc), an etcd member's through tests/tools/clockexec
#                (Go reads the clock through the vDSO with code of its
#                own, which no preloaded library reaches); targets
#                "mI +Ns"
# Storage (the group storage, FN_KINDS_STORAGE; cetcd members run with
# the backend's items for them from the start: fn_cluster_init):
#   slowdisk     every write call of a cetcd member's WAL and db waits
#                N ms (N drawn per member at start: 5, 20, 100 or 300),
#                through the same backend (delay=, while a trigger file
#                exists); targets "mI Nms"; the heal checks on the
#                member's WAL fsync histogram that its syncs were slow
#                meanwhile (fn_slowdisk_heal)
#   full         a member's data dir (a tmpfs of its own, fn_full_size,
#                in the run's private mount namespace) filled to the
#                last byte by a filler file, so that its db meets ENOSPC
#                (its WAL only when it must preallocate a segment: both
#                etcd and cetcd write into preallocated 64 MB ones);
#                healed by removing the filler and starting the member
#                again if it exited (etcd 3.4 exits on the first failed
#                bbolt commit or WAL save: lg.Fatal in
#                mvcc/backend/batch_tx.go and etcdserver/raft.go; a
#                cetcd daemon exits and its launcher restarts it);
#                targets "mI NMB" (the filler's size)
#   crash        a power cut: a cetcd member (1 time in 3 every cetcd
#                member at once: a majority in a mixed cluster), its
#                launcher stopped first, then every process SIGKILLed;
#                then tests/tools/crashrevert turns its WAL and db into
#                what the disk could have kept (the crash journals of
#                the backend's crashlog item: drop, every write since
#                the last sync lost, or random, each kept, lost or
#                torn); healed by starting it again; targets
#                "mI... drop|random"
# Membership (the group member, FN_KINDS_MEMBER; each heals to three
# voters again; replace only in a mixed cluster):
#   move-leader  leadership moved (etcdctl move-leader, asked of the
#                leader) to one of the other two, drawn; targets
#                "mI -> mJ"; the stop is logged once it answered
#   remove-readd a member (the leader 2 times in 3) removed through the
#                others, stopped (it should stop by itself), its data
#                and runtime dirs wiped; healed as an operator does: added
#                back as a learner on the same name, namespace and
#                address, started with --initial-cluster-state existing,
#                promoted once etcd's check lets it (retried while the
#                learner is not ready); targets "mI"
#   replace      the same, but the member comes back as the other kind
#                (cetcd for etcd and the reverse; mixed clusters only):
#                one of the two members of the same kind is drawn, so
#                both kinds stay and over a run the kinds move between
#                members; targets "mI KIND->KIND"
# A member that is not a voter again within 60 s of its heal is a
# failed run (FN_BROKEN).
# This kernel has no netem (CONFIG_NET_SCH_NETEM) and no gact action:
# loss and reordering are an htb qdisc whose second class a classic BPF
# filter feeds with a random share of the packets (ld rand), dropped by
# a pfifo of limit 0 (loss) or held in a slow lane (reorder); delay is a
# rate limit.
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

FN_NET=10.77.0
FN_CLOCKSTEP=$IT_BUILD/tests/libclockstep.so
FN_CLOCKEXEC=$IT_BUILD/tests/clockexec
# the groups (the header above describes each kind)
FN_KINDS_NET="isolate split bridge oneway loss reorder slow clientcut"
FN_KINDS_PROC="kill pause kill-daemon pause-daemon"
FN_KINDS_ALL="$FN_KINDS_NET $FN_KINDS_PROC disk clock"
FN_KINDS_STORAGE="slowdisk full crash"
FN_KINDS_MEMBER="move-leader remove-readd replace"
FN_CRASHREVERT=$IT_BUILD/tests/crashrevert
# each member's data dir when the kind full runs (fn_full_size): the WAL
# segments both etcd and cetcd keep (--max-wals 5 of 64 MB, and the next
# one preallocated) and room for the db, which grows with the run (no
# compaction); empty: that size for the run's seconds
FN_FULL_SIZE=${FN_FULL_SIZE:-}
fn_full_size() { echo "${FN_FULL_SIZE:-$((448 + FN_SECS / 2))m}"; }

# ------------------------------------------------------------ randomness
# Every choice the harness makes comes from bash's RANDOM, seeded once
# with the run's seed (fn_seed). fn_rand N sets FN_R to a number in
# [0, N): never call it in $(...), whose draw a subshell would lose.
fn_seed() { RANDOM=$1; }
fn_rand() { FN_R=$((((RANDOM << 15) | RANDOM) % $1)); }
# fn_pick WORD...: FN_P = one of the words.
fn_pick() {
	local w=("$@")
	fn_rand $#
	FN_P=${w[FN_R]}
}

# ------------------------------------------------------------ faults.log
# fn_log start|stop KIND [TARGETS...]: a line of the run's faults.log
# (FN_OUT), CLOCK_REALTIME ns first; echoed to the harness's log.
fn_log() {
	local line
	line="$(date +%s%N) $*"
	echo "$line" >>"$FN_OUT/faults.log"
	echo "  $line"
}

# ------------------------------------------------------------ network
# fn_net_names TAG: FN_BR and FN_NS[0..2], namespace names for run TAG.
fn_net_names() {
	FN_BR=cetcd-fault-$1-br
	FN_NS=("cetcd-fault-$1-m0" "cetcd-fault-$1-m1" "cetcd-fault-$1-m2")
}

# fn_net_up: the bridge's namespace and one per member (fn_net_names
# first). Every interface is created inside them.
fn_net_up() {
	local i
	ip netns add "$FN_BR"
	ip -n "$FN_BR" link set lo up
	ip -n "$FN_BR" link add br0 type bridge
	ip -n "$FN_BR" addr add "$FN_NET.1/24" dev br0
	ip -n "$FN_BR" link set br0 up
	for i in 0 1 2; do
		ip netns add "${FN_NS[i]}"
		ip -n "${FN_NS[i]}" link set lo up
		ip -n "$FN_BR" link add "vm$i" type veth peer name eth0 netns "${FN_NS[i]}"
		ip -n "$FN_BR" link set "vm$i" master br0 up
		ip -n "${FN_NS[i]}" addr add "$(fn_addr "$i")/24" dev eth0
		ip -n "${FN_NS[i]}" link set eth0 up
	done
}

# fn_net_down: SIGKILL of whatever still runs in the namespaces (only
# this run starts processes there), then they go.
fn_net_down() {
	local ns p
	for ns in "${FN_NS[@]}" "$FN_BR"; do
		[[ -e /run/netns/$ns ]] || continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -CONT "$p" 2>/dev/null || true
			kill -9 "$p" 2>/dev/null || true
		done
		ip netns del "$ns" 2>/dev/null || true
	done
}

fn_addr() { echo "$FN_NET.$((11 + $1))"; }
fn_name() { echo "${IT_CL_NAMES[$1]}"; }

# fn_cut I J: member I's packets to member J go nowhere (a blackhole
# route in I's namespace); fn_uncut I J takes it back.
fn_cut() { ip -n "${FN_NS[$1]}" route add blackhole "$(fn_addr "$2")/32"; }
fn_uncut() { ip -n "${FN_NS[$1]}" route del blackhole "$(fn_addr "$2")/32" 2>/dev/null || true; }

# fn_lane NS DEV PCT RATE LEAF: on DEV's egress in NS, an htb qdisc whose
# class 1:1 (10 Gbit/s) takes every packet but PCT % of them (drawn by a
# classic BPF filter on a random number: ld rand, jge), which go to class
# 1:2 at RATE with the leaf qdisc LEAF (words of tc); PCT 100: all go to
# 1:2. fn_unlane NS DEV removes it.
fn_lane() {
	local ns=$1 dev=$2 pct=$3 rate=$4 def=1
	shift 4
	((pct >= 100)) && def=2
	fn_lanes "$ns" "$dev" "$def" "$rate" "$@"
	((pct >= 100)) && return 0
	# A = a random u32; A < PCT% of 2^32: -1, the filter's class (1:2);
	# else 0, no match (the default, 1:1)
	tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 bpf \
		bytecode "4,32 0 0 4294963256,53 0 1 $((pct * 42949672)),6 0 0 0,6 0 0 4294967295" flowid 1:2
}
fn_unlane() { tc -n "$1" qdisc del dev "$2" root 2>/dev/null || true; }
# fn_lanes NS DEV DEFAULT RATE LEAF...: fn_lane's qdisc and classes, the
# class DEFAULT (1 or 2) taking what no filter sends elsewhere.
fn_lanes() {
	local ns=$1 dev=$2 def=$3 rate=$4
	shift 4
	tc -n "$ns" qdisc replace dev "$dev" root handle 1: htb default "$def"
	tc -n "$ns" class add dev "$dev" parent 1: classid 1:1 htb rate 10gbit quantum 60000
	tc -n "$ns" class add dev "$dev" parent 1: classid 1:2 htb rate "$rate" ceil "$rate" \
		burst 1600 cburst 1600 quantum 1514
	tc -n "$ns" qdisc add dev "$dev" parent 1:2 handle 20: "$@"
}
# fn_drop NS DEV MATCH...: on DEV's egress in NS, the IPv4 packets that
# the u32 selectors MATCH (words of tc, e.g. match ip dport 2379 0xffff)
# dropped (a class whose pfifo holds none), the others untouched;
# fn_unlane NS DEV removes it.
fn_drop() {
	local ns=$1 dev=$2
	shift 2
	fn_lanes "$ns" "$dev" 1 10gbit pfifo limit 0
	tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 u32 "$@" flowid 1:2
}

# fn_link_lane I PCT RATE LEAF...: fn_lane on both ends of member I's
# link (so its packets suffer both ways); fn_link_unlane I.
fn_link_lane() {
	local i=$1
	shift
	fn_lane "${FN_NS[i]}" eth0 "$@" && fn_lane "$FN_BR" "vm$i" "$@"
}
fn_link_unlane() {
	fn_unlane "${FN_NS[$1]}" eth0
	fn_unlane "$FN_BR" "vm$1"
}

# ------------------------------------------------------------ members
# fn_cluster_init KIND0 KIND1 KIND2 FAULTS: the three members' settings
# (it_cl_init), each on its own address in its own namespace, on etcd's
# ports, ready for the fault kinds among FAULTS (words) that need the
# members started in a way of their own:
#   clock     cetcd members run with tests/tools/clockstep preloaded,
#             etcd members under tests/tools/clockexec, their wall clock
#             offset read from IT_TMP/<name>.clock at every reading
#             (monotonic clocks untouched, as a real clock step leaves
#             them; fn_clock_set writes it)
#   disk      each cetcd member's WAL or db (FN_DISK[I], drawn) fails its
#             first fdatasync made while IT_TMP/<name>.disk exists, once
#             (the daemon it fails in removes the file, so the one
#             restarted runs clean)
#   slowdisk  each cetcd member's writes wait FN_SLOW[I] ms (drawn)
#             while IT_TMP/<name>.slowdisk exists; the backend has one
#             trigger file a member, so with disk too each cetcd member
#             gets one of the two, drawn
#   crash     cetcd members keep crash journals of their WAL and db
#             (FN_CRASH=1); disk then fails whichever of the two syncs
#             first while armed (FN_DISK[I] "both")
#   full      each member's data dir is a tmpfs of fn_full_size of its
#             own (FN_FULL=1), unmounted at exit
# The disk and slowdisk draws happen only for cetcd members and only
# when those kinds are among FAULTS, so the same seed with other kinds
# or another cluster draws differently from here on (a seed replays its
# run only with the same kinds and cluster, tests/fault/regressions.list).
fn_cluster_init() {
	local i f=" $4 "
	FN_KIND=("$1" "$2" "$3")
	FN_CLOCK=0 FN_CRASH=0 FN_FULL=0
	[[ $f == *" clock "* ]] && FN_CLOCK=1
	[[ $f == *" crash "* ]] && FN_CRASH=1
	[[ $f == *" full "* ]] && FN_FULL=1
	it_cl_init "fault-$FN_SEED" 3 m
	for i in 0 1 2; do
		IT_CL_HOST[i]=$(fn_addr "$i")
		IT_CL_CPORT[i]=2379 IT_CL_PPORT[i]=2380 IT_CL_APORT[i]=2380
		if [[ ${FN_KIND[i]} == cetcd && $f == *" disk "* ]]; then
			fn_pick wal db
			FN_DISK[i]=$FN_P
			((FN_CRASH)) && FN_DISK[i]=both
		fi
		if [[ ${FN_KIND[i]} == cetcd && $f == *" slowdisk "* ]]; then
			fn_pick 5 20 100 300
			FN_SLOW[i]=$FN_P
			if [[ -n ${FN_DISK[i]:-} ]]; then
				fn_rand 2
				if ((FN_R)); then FN_DISK[i]=; else FN_SLOW[i]=; fi
			fi
		fi
		((FN_FULL)) && it_tmpfs "$IT_TMP/$(fn_name "$i")" "$(fn_full_size)"
		fn_prefix "$i"
	done
	IT_CL_INITIAL=$(it_cl_initial 0 1 2)
}
# fn_prefix I: IT_CL_PREFIX[I] for member I's kind (FN_KIND[I]): its
# namespace, and clockstep or clockexec (FN_CLOCK=1) and for cetcd the
# disk fault backend (FN_DISK[I], FN_SLOW[I], FN_CRASH) as
# fn_cluster_init says.
fn_prefix() {
	local i=$1 name items="" file=both
	name=$(fn_name "$i")
	IT_CL_PREFIX[i]="ip netns exec ${FN_NS[i]} env"
	if [[ $FN_CLOCK == 1 ]]; then
		fn_clock_set "$i" 0
		IT_CL_PREFIX[i]+=" CLOCKSTEP_FILE=$IT_TMP/$name.clock"
		if [[ ${FN_KIND[i]} == cetcd ]]; then
			IT_CL_PREFIX[i]+=" LD_PRELOAD=$FN_CLOCKSTEP"
		else
			IT_CL_PREFIX[i]+=" $FN_CLOCKEXEC" # etcd runs as its child
		fi
	fi
	[[ ${FN_KIND[i]} == cetcd ]] || return 0
	if [[ -n ${FN_DISK[i]:-} ]]; then
		file=${FN_DISK[i]}
		items+=",sync=0,trigger=$IT_TMP/$name.disk"
	fi
	[[ -n ${FN_SLOW[i]:-} ]] && items+=",delay=${FN_SLOW[i]},trigger=$IT_TMP/$name.slowdisk"
	[[ $FN_CRASH == 1 ]] && items+=",crashlog"
	[[ -z $items ]] || IT_CL_PREFIX[i]+=" CETCD_TEST_DISKIO_FAULT=file=$file$items"
}

# fn_start I [join]: member I (again, on its data dir), etcd's log as
# JSON lines, cetcd with the flags of FAULT_CETCD_FLAGS (run.sh); with
# join, a member added to the running cluster (--initial-cluster-state
# existing).
fn_start() {
	local extra=()
	if [[ ${FN_KIND[$1]} == etcd ]]; then
		extra=(--logger zap --log-outputs stderr)
	else
		# shellcheck disable=SC2206 # words of flags
		extra=(${FAULT_CETCD_FLAGS:-})
	fi
	if [[ ${2:-} == join ]]; then
		it_cl_join "$1" "${FN_KIND[$1]}" "$IT_CL_INITIAL" "${extra[@]}"
	else
		it_cl_start "$1" "${FN_KIND[$1]}" "${extra[@]}"
	fi
}

# fn_procs I: the pids of member I, its launcher first then its daemons
# (etcd: its one process).
fn_procs() {
	echo "${IT_CL_PIDS[$1]}"
	pgrep -P "${IT_CL_PIDS[$1]}" 2>/dev/null || true
}

# fn_daemons I: the names of member I's running daemons (raftd, stored,
# gatewayd-N), one a line.
fn_daemons() {
	local p args
	for p in $(pgrep -P "${IT_CL_PIDS[$1]}" 2>/dev/null); do
		args=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
		case $args in
		*/gatewayd\ --gateway-index=*) args=${args#*--gateway-index=} && echo "gatewayd-${args%% *}" ;;
		*/raftd\ *) echo raftd ;;
		*/stored\ *) echo stored ;;
		esac
	done
}
fn_daemon_pid() { IT_CETCD_PID=${IT_CL_PIDS[$1]} it_cetcd_child "$2"; }

# fn_ids: FN_ID[I], each member's id (hex), asked once all answer.
fn_ids() {
	local i
	for i in 0 1 2; do FN_ID[i]=$(it_member_id "$(it_cl_ep "$i")"); done
}

# fn_leader: FN_LEADER, the index of the member the first member to
# answer (within 1 s) names as leader; -1 when none does.
fn_leader() {
	local i id j
	FN_LEADER=-1
	for i in 0 1 2; do
		id=$(etcdctl --dial-timeout 300ms --command-timeout 1s --endpoints "$(it_cl_ep "$i")" \
			endpoint status -w json 2>/dev/null |
			python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["leader"])' 2>/dev/null) || continue
		for j in 0 1 2; do
			[[ ${FN_ID[j]} == "$id" ]] && { FN_LEADER=$j; return 0; }
		done
	done
}

# fn_target: FN_T, a member: the leader 2 times in 3 when there is one,
# else one drawn evenly. fn_target_in I...: the same among members I...
# (FN_T=-1 when none is given); fn_target_cetcd among cetcd members.
# Each draws as many numbers whatever it finds, so a replay of a seed
# draws the same faults at the same times even where the cluster
# answered otherwise.
fn_target() {
	local lead
	fn_leader
	fn_rand 3
	lead=$FN_R
	fn_rand 3
	((lead < 2 && FN_LEADER >= 0)) && FN_R=$FN_LEADER
	FN_T=$FN_R
}
fn_target_in() {
	FN_T=-1
	(($#)) || return 0
	fn_target
	fn_pick "$@"
	[[ " $* " == *" $FN_T "* ]] || FN_T=$FN_P
}
# shellcheck disable=SC2046 # one word a member
fn_target_cetcd() { fn_target_in $(fn_cetcd_members "$@"); }
# fn_cetcd_members [ARRAY]: the cetcd members (those whose ARRAY[I] is
# set, when ARRAY is named), one a line.
fn_cetcd_members() {
	local i
	for i in 0 1 2; do
		[[ ${FN_KIND[i]} == cetcd ]] || continue
		if (($#)); then
			local -n a=$1
			[[ -n ${a[i]:-} ]] || continue
		fi
		echo "$i"
	done
}

# ------------------------------------------------------------ nemeses
# fn_fault_KIND: applies the fault, logs its start, and sets FN_HEAL to
# the command that heals it (run by fn_heal, which logs the stop);
# FN_HEAL stays empty when the fault heals itself (kill-daemon) or could
# not be applied (no cetcd member for a daemon fault).
fn_others() { it_cl_but "$1" | tr '\n' ' '; }

fn_fault_isolate() {
	fn_target
	fn_isolate "$FN_T" isolate
}
fn_fault_split() {
	fn_rand 3
	fn_isolate "$FN_R" split
}
fn_isolate() {
	local i=$1 j
	for j in $(fn_others "$i"); do fn_cut "$i" "$j" && fn_cut "$j" "$i"; done
	fn_log start "$2" "$(fn_name "$i")" "|" $(for j in $(fn_others "$i"); do fn_name "$j"; done)
	FN_HEAL="fn_unisolate $i"
}
fn_unisolate() {
	local j
	for j in $(fn_others "$1"); do fn_uncut "$1" "$j" && fn_uncut "$j" "$1"; done
}

fn_fault_bridge() {
	local a b m
	fn_target
	a=$FN_T
	fn_rand 2
	m=$(fn_others "$a")
	read -r -a m <<<"$m"
	b=${m[FN_R]} m=${m[1 - FN_R]}
	fn_cut "$a" "$b" && fn_cut "$b" "$a"
	fn_log start bridge "$(fn_name "$a")" "|" "$(fn_name "$m")" "|" "$(fn_name "$b")"
	FN_HEAL="fn_uncut $a $b && fn_uncut $b $a"
}

fn_fault_oneway() {
	local a b o
	fn_target
	read -r -a o <<<"$(fn_others "$FN_T")"
	# the leader's packets lost on the way out, or on the way in
	fn_rand 2
	if ((FN_R)); then a=$FN_T b=${o[0]}; else a=${o[1]} b=$FN_T; fi
	fn_cut "$a" "$b"
	fn_log start oneway "$(fn_name "$a")" "->" "$(fn_name "$b")"
	FN_HEAL="fn_uncut $a $b"
}

fn_fault_loss() {
	fn_target
	fn_pick 5 10 20 35 50
	fn_link_lane "$FN_T" "$FN_P" 10gbit pfifo limit 0
	fn_log start loss "$(fn_name "$FN_T")" "$FN_P%"
	FN_HEAL="fn_link_unlane $FN_T"
}
fn_fault_reorder() {
	fn_target
	fn_pick 10 25 50
	fn_link_lane "$FN_T" "$FN_P" 64kbit pfifo limit 200
	fn_log start reorder "$(fn_name "$FN_T")" "$FN_P%"
	FN_HEAL="fn_link_unlane $FN_T"
}
fn_fault_slow() {
	fn_target
	fn_pick 256kbit 1mbit 4mbit
	fn_link_lane "$FN_T" 100 "$FN_P" pfifo limit 50
	fn_log start slow "$(fn_name "$FN_T")" "$FN_P"
	FN_HEAL="fn_link_unlane $FN_T"
}

fn_fault_clientcut() {
	fn_target
	fn_client_cut "$FN_T"
	fn_log start clientcut "$(fn_name "$FN_T")"
	FN_HEAL="fn_link_unlane $FN_T"
}
# fn_client_cut I: the bridge's namespace (the workload, the harness)
# cut from member I's client port both ways, its peer port untouched.
fn_client_cut() {
	local port=${IT_CL_CPORT[$1]}
	fn_drop "$FN_BR" "vm$1" match ip src "$FN_NET.1/32" match ip dport "$port" 0xffff &&
		fn_drop "${FN_NS[$1]}" eth0 match ip dst "$FN_NET.1/32" match ip sport "$port" 0xffff
}

fn_fault_kill() {
	local p
	fn_target
	# every process of the member at once, as a power cut
	for p in $(fn_procs "$FN_T"); do kill -9 "$p" 2>/dev/null || true; done
	# reaped at once, or the shell reports the kill in the log
	wait "${IT_CL_PIDS[FN_T]}" 2>/dev/null || true
	fn_log start kill "$(fn_name "$FN_T")"
	FN_HEAL="fn_restart $FN_T"
}
# fn_restart I...: members I... started again on their data dirs once
# their old processes are gone.
fn_restart() {
	local i p
	for i in "$@"; do
		for p in $(fn_procs "$i"); do it_wait_gone "$p" 10000 || true; done
		wait "${IT_CL_PIDS[i]}" 2>/dev/null || true
		fn_start "$i"
	done
}

fn_fault_pause() {
	local p
	fn_target
	FN_PAUSED=$(fn_procs "$FN_T" | tr '\n' ' ')
	for p in $FN_PAUSED; do kill -STOP "$p" 2>/dev/null || true; done
	fn_log start pause "$(fn_name "$FN_T")"
	FN_HEAL="fn_resume"
}
fn_resume() {
	local p
	for p in $FN_PAUSED; do kill -CONT "$p" 2>/dev/null || true; done
	FN_PAUSED=
}

# fn_daemon_target: FN_T a cetcd member (the leader 2 times in 3) and
# FN_D one of its daemons; 1 when there is none.
fn_daemon_target() {
	local d
	fn_target_cetcd
	((FN_T >= 0)) || return 1
	d=$(fn_daemons "$FN_T" | sort)
	[[ -n $d ]] || return 1
	# shellcheck disable=SC2086 # one word a daemon
	fn_pick $d
	FN_D=$FN_P
}
fn_fault_kill-daemon() {
	local pid
	fn_daemon_target && pid=$(fn_daemon_pid "$FN_T" "$FN_D") || {
		echo "  (no cetcd daemon to kill)"
		return 0
	}
	kill -9 "$pid"
	fn_log start kill-daemon "$(fn_name "$FN_T")" "$FN_D"
	# the launcher heals it: the stop is when the new one runs
	if IT_CETCD_PID=${IT_CL_PIDS[FN_T]} it_wait_child "$FN_D" "$pid" 30 >/dev/null; then
		fn_log stop kill-daemon
	else
		fn_log stop kill-daemon
		echo "  FAIL: the launcher did not restart $FN_D of $(fn_name "$FN_T") in 30 s"
		FN_BROKEN+="${FN_BROKEN:+,}daemon-not-restarted"
	fi
}
fn_fault_pause-daemon() {
	fn_daemon_target && FN_PAUSED=$(fn_daemon_pid "$FN_T" "$FN_D") || {
		echo "  (no cetcd daemon to pause)"
		return 0
	}
	kill -STOP "$FN_PAUSED"
	fn_log start pause-daemon "$(fn_name "$FN_T")" "$FN_D"
	FN_HEAL="fn_resume"
}

fn_fault_clock() {
	local f
	fn_target_in 0 1 2 # the draws of fn_target_cetcd on a cetcd cluster
	if [[ ! -f $IT_TMP/$(fn_name "$FN_T").clock ]]; then
		echo "  (no member runs with clockstep or clockexec)"
		return 0
	fi
	fn_pick + -
	f=$FN_P
	fn_pick 5 30 90 600
	f+=$FN_P
	fn_clock_set "$FN_T" "$f"
	fn_log start clock "$(fn_name "$FN_T")" "${f}s"
	FN_HEAL="fn_clock_set $FN_T 0"
}
# fn_clock_set I OFFSET: member I's clock offset (seconds, signed),
# written in place, padded (clockstep maps the file).
fn_clock_set() { printf '%-15s\n' "$2" 1<>"$IT_TMP/$(fn_name "$1").clock"; }

# fn_arm KIND ARRAY [UNIT]: a cetcd member whose ARRAY[I] is set drawn
# (fn_target_cetcd), its trigger IT_TMP/<name>.KIND made (the disk fault
# backend's trigger=, fn_prefix), the start logged with targets "mI
# ARRAY[I]UNIT"; 1 when no member has it.
fn_arm() {
	local -n v=$2
	fn_target_cetcd "$2"
	if ((FN_T < 0)); then
		echo "  (no member runs with the backend's $1 fault)"
		return 1
	fi
	: >"$IT_TMP/$(fn_name "$FN_T").$1"
	fn_log start "$1" "$(fn_name "$FN_T")" "${v[FN_T]}${3:-}"
}
fn_fault_disk() {
	fn_arm disk FN_DISK || return 0
	FN_HEAL="fn_disk_heal $FN_T"
}
# fn_disk_heal I: says whether member I's disk fault fired (its trigger
# file is gone), and disarms it if not.
fn_disk_heal() {
	local t
	t=$IT_TMP/$(fn_name "$1").disk
	if [[ -e $t ]]; then
		rm -f "$t"
		echo "  (no fdatasync of $(fn_name "$1")'s ${FN_DISK[$1]} came while armed)"
	else
		echo "  ($(fn_name "$1")'s ${FN_DISK[$1]} fdatasync failed)"
	fi
}

fn_fault_slowdisk() {
	local at
	fn_arm slowdisk FN_SLOW ms || return 0
	at=$(fn_wal_syncs "$FN_T") || at=
	FN_HEAL="fn_slowdisk_heal $FN_T '$at'"
}
# fn_slowdisk_heal I AT: member I's slow disk disarmed, once its WAL's
# syncs since it was armed (AT: fn_wal_syncs then) are shown slow: their
# mean, on the WAL fsync histogram of its /metrics, under half the delay
# breaks the run (the backend's delay did not reach the WAL). No sync
# meanwhile, or metrics that cannot be read, are only said.
fn_slowdisk_heal() {
	local i=$1 now
	now=$(fn_wal_syncs "$i") || now=
	rm -f "$IT_TMP/$(fn_name "$i").slowdisk"
	if [[ -z $2 || -z $now ]]; then
		echo "  ($(fn_name "$i")'s WAL fsync histogram could not be read)"
		return 0
	fi
	# shellcheck disable=SC2086 # "SUM COUNT" twice
	set -- $2 $now "${FN_SLOW[i]}"
	awk -v name="$(fn_name "$i")" -v s0="$1" -v c0="$2" -v s1="$3" -v c1="$4" -v d="$5" 'BEGIN {
		n = c1 - c0
		if (n <= 0) { printf "  (no WAL sync of %s while its disk was slow)\n", name; exit 0 }
		m = (s1 - s0) * 1000 / n
		printf "  (%s: %d WAL syncs while its disk was slow, %.1f ms each on average, delay %d ms)\n", name, n, m, d
		exit m < d / 2
	}' && return 0
	echo "  FAIL: $(fn_name "$i")'s WAL syncs were not slowed by its slow disk"
	FN_BROKEN+="${FN_BROKEN:+,}slowdisk-not-slow"
}
# fn_wal_syncs I: "SUM COUNT" of member I's WAL fsync histogram
# (etcd_disk_wal_fsync_duration_seconds on its /metrics); 1 when it
# cannot be read.
fn_wal_syncs() {
	curl -sf --max-time 2 "http://$(it_cl_ep "$1")/metrics" 2>/dev/null |
		awk '$1 == "etcd_disk_wal_fsync_duration_seconds_sum" { s = $2 }
			$1 == "etcd_disk_wal_fsync_duration_seconds_count" { c = $2 }
			END { if (s == "" || c == "") exit 1; print s, c }'
}

# fn_filler I: the file that fills member I's data dir (full).
fn_filler() { echo "$IT_TMP/$(fn_name "$1")/filler"; }
fn_fault_full() {
	local f
	fn_target
	if [[ $FN_FULL != 1 ]]; then
		echo "  (the members' data dirs are no file systems of their own)"
		return 0
	fi
	f=$(fn_filler "$FN_T")
	# dd stops at ENOSPC, the last block cut short: no byte is left
	dd if=/dev/zero of="$f" bs=1M 2>/dev/null || true
	fn_log start full "$(fn_name "$FN_T")" "$(du -m "$f" | cut -f1)MB"
	FN_HEAL="fn_full_heal $FN_T"
}
# fn_full_heal I: member I's filler removed, the member started again if
# it exited meanwhile.
fn_full_heal() {
	rm -f "$(fn_filler "$1")"
	if it_gone "${IT_CL_PIDS[$1]}"; then
		echo "  ($(fn_name "$1") exited while its disk was full: started again)"
		fn_restart "$1"
	fi
}

fn_fault_crash() {
	local mode t i p procs=() s
	fn_target_cetcd
	fn_rand 3
	t=$FN_T
	((FN_R == 0 && FN_T >= 0)) && t=$(fn_cetcd_members | tr '\n' ' ')
	fn_pick drop random
	mode=$FN_P
	if ((FN_T < 0)) || [[ $FN_CRASH != 1 ]]; then
		echo "  (no member keeps crash journals)"
		return 0
	fi
	# the launchers stopped first, so that none restarts a daemon, then
	# every process at once
	for i in $t; do
		kill -STOP "${IT_CL_PIDS[i]}" 2>/dev/null || true
		mapfile -t -O "${#procs[@]}" procs < <(fn_procs "$i")
	done
	for p in "${procs[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	# the launchers reaped at once (or the shell reports their kill)
	for i in $t; do wait "${IT_CL_PIDS[i]}" 2>/dev/null || true; done
	for p in "${procs[@]}"; do it_wait_gone "$p" 10000 || true; done
	# shellcheck disable=SC2046,SC2086 # one word a member
	fn_log start crash $(for i in $t; do fn_name "$i"; done) "$mode"
	for i in $t; do
		fn_rand 1000000
		s=$FN_R
		it_crashrevert "$mode" "$s" "$IT_TMP/$(fn_name "$i")/member" ||
			echo "  FAIL: crashrevert on $(fn_name "$i")"
		echo "  ($(fn_name "$i"): $IT_REVERTED journaled files reverted, $mode, seed $s)"
	done
	FN_HEAL="fn_restart $t"
}

# ------------------------------------------------------------ membership
# fn_eps_but I: the client endpoints of the members but I,
# comma-separated.
fn_eps_but() {
	local j s=
	for j in $(fn_others "$1"); do s+="${s:+,}$(it_cl_ep "$j")"; done
	echo "$s"
}
# fn_ctl EPS ARGS...: etcdctl ARGS at EPS (1 s to dial, 5 s a command),
# its output without the client's JSON log lines; etcdctl's status.
fn_ctl() {
	local eps=$1
	shift
	etcdctl --dial-timeout 1s --command-timeout 5s --endpoints "$eps" "$@" </dev/null 2>&1 |
		{ grep -v '^{"level"' || true; }
	return "${PIPESTATUS[0]}"
}
# fn_members EPS: the members as EPS list them, one a line: "ID NAME
# LEARNER PEER-URL" (ID hex, NAME "?" before it started, LEARNER 0 or 1).
fn_members() {
	etcdctl --dial-timeout 1s --command-timeout 3s --endpoints "$1" member list -w json 2>/dev/null </dev/null |
		python3 -c 'import json, sys
for m in json.load(sys.stdin)["members"]:
    print("%x" % m["ID"], m.get("name") or "?", int(bool(m.get("isLearner"))), (m.get("peerURLs") or ["?"])[0])'
}

fn_fault_move-leader() {
	local o to
	fn_leader
	fn_rand 2
	if ((FN_LEADER < 0)); then
		echo "  (no leader to move)"
		return 0
	fi
	read -r -a o <<<"$(fn_others "$FN_LEADER")"
	to=${o[FN_R]}
	fn_log start move-leader "$(fn_name "$FN_LEADER")" "->" "$(fn_name "$to")"
	fn_ctl "$(it_cl_ep "$FN_LEADER")" move-leader "${FN_ID[to]}" | sed 's/^/  /' || true
	fn_log stop move-leader
}

fn_fault_remove-readd() {
	fn_target
	fn_remove "$FN_T" remove-readd
	FN_HEAL="fn_rejoin $FN_T ${FN_KIND[FN_T]}"
}
fn_fault_replace() {
	local i same=() other
	fn_target
	fn_rand 2
	if [[ " ${FN_KIND[*]} " != *" cetcd "* || " ${FN_KIND[*]} " != *" etcd "* ]]; then
		echo "  (replace needs a mixed cluster)"
		return 0
	fi
	# one of the two members of a kind is replaced, so both kinds stay:
	# the target when it is one of them, else one of them drawn
	for i in 0 1 2; do [[ ${FN_KIND[i]} == "${FN_KIND[FN_T]}" ]] && same+=("$i"); done
	((${#same[@]} == 2)) || FN_T=$(fn_others "$FN_T" | cut -d' ' -f$((FN_R + 1)))
	other=cetcd
	[[ ${FN_KIND[FN_T]} == cetcd ]] && other=etcd
	fn_remove "$FN_T" replace "${FN_KIND[FN_T]}->$other"
	FN_HEAL="fn_rejoin $FN_T $other"
}

# fn_remove I KIND [TARGETS...]: the start of KIND logged, member I
# removed through the others (retried for 15 s, as an answer may be
# lost), then stopped (SIGKILL when it has not stopped by itself within
# 10 s). When the others never removed it, it is left as it was
# (fn_rejoin finds it still running).
fn_remove() {
	local i=$1 kind=$2 eps p procs
	shift 2
	eps=$(fn_eps_but "$i")
	fn_log start "$kind" "$(fn_name "$i")" "$@"
	((i != FN_LEADER)) || echo "  ($(fn_name "$i") leads)"
	if ! it_until 15000 fn_removed "$eps" "${FN_ID[i]}"; then
		echo "  ($(fn_name "$i") was not removed in 15 s)"
		return 0
	fi
	procs=$(fn_procs "$i" | tr '\n' ' ')
	if it_wait_gone "${IT_CL_PIDS[i]}" 10000; then
		echo "  ($(fn_name "$i") stopped by itself once removed)"
	else
		echo "  ($(fn_name "$i") still runs 10 s after its removal: SIGKILL)"
	fi
	for p in $procs; do kill -9 "$p" 2>/dev/null || true; done
	for p in $procs; do it_wait_gone "$p" 10000 || true; done
	wait "${IT_CL_PIDS[i]}" 2>/dev/null || true
}
# fn_removed EPS ID: asks EPS to remove member ID unless their list no
# longer has it; 0 once it does not (a follower's list may lag).
fn_removed() {
	local m
	m=$(fn_members "$1") || return 1
	[[ $'\n'$m != *$'\n'"$2 "* ]] && return 0
	fn_ctl "$1" member remove "$2" >/dev/null || sleep 0.2
	return 1
}

# fn_rejoin I KIND: member I (removed and stopped by fn_remove), its
# data and runtime dirs wiped, added back through the others as a learner on its name and peer URL, started as
# KIND with --initial-cluster-state existing, promoted once the leader
# finds it caught up; FN_ID[I] its new id. A member never removed is
# left alone. One that is not a voter within 60 s breaks the run.
fn_rejoin() {
	local i=$1 kind=$2 eps stem
	eps=$(fn_eps_but "$i")
	if ! it_gone "${IT_CL_PIDS[i]}"; then
		echo "  ($(fn_name "$i") is still a member: nothing to add back)"
		return 0
	fi
	stem=$IT_CL_STEM$(fn_name "$i")
	rm -rf "${IT_RT:?}/$stem"
	# a data dir that is a file system of its own (full) stays, empty
	if mountpoint -q "$IT_TMP/$stem"; then
		find "$IT_TMP/$stem" -mindepth 1 -delete
	else
		rm -rf "${IT_TMP:?}/$stem"
	fi
	if ! it_until 20000 fn_added "$eps" "$i"; then
		echo "  FAIL: $(fn_name "$i") could not be added back as a learner in 20 s: $FN_CTL_LAST"
		FN_BROKEN+="${FN_BROKEN:+,}not-added"
		return 0
	fi
	FN_KIND[i]=$kind
	fn_prefix "$i"
	fn_start "$i" join
	if ! it_until 60000 fn_promoted "$eps" "$FN_NEW_ID"; then
		echo "  FAIL: learner $(fn_name "$i") ($FN_NEW_ID) not promoted in 60 s: $FN_CTL_LAST"
		FN_BROKEN+="${FN_BROKEN:+,}not-promoted"
		return 0
	fi
	echo "  ($(fn_name "$i") is back as $kind, id $FN_NEW_ID, after $FN_PROMOTE_TRIES promote calls)"
	FN_ID[i]=$FN_NEW_ID
}
# fn_added EPS I: FN_NEW_ID the id of the member on I's peer URL in the
# list of EPS (asking them to add it as a learner first when there is
# none); 0 once it is there.
fn_added() {
	local m id name learner url
	m=$(fn_members "$1") || return 1
	while read -r id name learner url; do
		[[ $url == "$(it_cl_purl "$2")" ]] || continue
		FN_NEW_ID=$id FN_PROMOTE_TRIES=0
		return 0
	done <<<"$m"
	FN_CTL_LAST=$(fn_ctl "$1" member add "$(fn_name "$2")" --learner --peer-urls "$(it_cl_purl "$2")" | tail -n 1) ||
		sleep 0.2
	return 1
}
# fn_promoted EPS ID: member ID a voter in the list of EPS (asking them
# to promote it first when it is a learner, then 0.5 s to catch up).
fn_promoted() {
	local m
	m=$(fn_members "$1") || return 1
	awk -v id="$2" '$1 == id && $3 == 0 { v = 1 } END { exit !v }' <<<"$m" && return 0
	FN_PROMOTE_TRIES=$((FN_PROMOTE_TRIES + 1))
	FN_CTL_LAST=$(fn_ctl "$1" member promote "$2" | tail -n 1) || sleep 0.5
	return 1
}

# fn_heal: the current fault healed (FN_HEAL), its stop logged.
fn_heal() {
	[[ -n ${FN_HEAL:-} ]] || return 0
	eval "$FN_HEAL" || echo "  FAIL: healing failed: $FN_HEAL"
	fn_log stop "$FN_KIND_NOW"
	FN_HEAL=
}

# fn_nemesis KINDS UNTIL: until epoch ms UNTIL, a fault drawn from KINDS
# (a word each), held 1 to 6 s (never past UNTIL), healed, then 0.5 to
# 2.5 s of quiet.
fn_nemesis() {
	local kinds=$1 until=$2 hold left
	# shellcheck disable=SC2086 # one word a kind
	while (($(it_now_ms) < until - 2000)); do
		fn_pick $kinds
		FN_KIND_NOW=$FN_P
		"fn_fault_$FN_KIND_NOW"
		fn_rand 5000
		hold=$((1000 + FN_R))
		left=$((until - $(it_now_ms)))
		((hold > left)) && hold=$((left > 0 ? left : 0))
		sleep "$((hold / 1000)).$(printf '%03d' $((hold % 1000)))"
		fn_heal
		fn_rand 2000
		FN_R=$((FN_R + 500))
		sleep "$((FN_R / 1000)).$(printf '%03d' $((FN_R % 1000)))"
	done
}

# ------------------------------------------------------------ verdict
# fn_recovery FAULTS HISTORY: per "stop" line of FAULTS, the ms from it
# until a write was acknowledged through every endpoint of HISTORY after
# it (clients are pinned to members, so writes through the members the
# fault spared say little); prints their median (-1 when no stop was
# followed by one through every endpoint). Says on stderr which stops
# were not. An acknowledged write is an ok write, a cas or txn that
# applied, a lock taken or a lock's marker written, made during the run:
# a read, a cas or txn that did not apply, a watcher's own events and the
# checks made after the run are not.
fn_recovery() {
	python3 - "$1" "$2" <<'EOF'
import bisect, json, sys
stops = []
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) >= 3 and w[1] == "stop":
        stops.append((int(w[0]), w[2]))
writes = {}
try:
    for line in open(sys.argv[2]):
        try:
            op = json.loads(line)
        except ValueError:
            continue
        writes.setdefault(op.get("ep"), [])
        f = op.get("f")
        if op.get("type") != "ok" or op.get("final"):
            continue
        if f in ("write", "lock", "marker-write") or (f in ("cas", "txn") and op.get("succeeded")):
            writes[op.get("ep")].append(op["ret_ns"])
except FileNotFoundError:
    pass
for w in writes.values():
    w.sort()
got = []
for at, kind in stops:
    firsts = []
    for ep, w in writes.items():
        k = bisect.bisect_left(w, at)
        if k == len(w):
            print("no ok write through %s after the %s healed at %d" % (ep, kind, at), file=sys.stderr)
            break
        firsts.append(w[k] - at)
    else:
        if firsts:
            got.append(max(firsts) // 1000000)
got.sort()
print("recovery_ms per heal, sorted:", *got, file=sys.stderr)
print(got[len(got) // 2] if got else -1)
EOF
}

# fn_field LINE NAME: the value of NAME=V in faultload's summary LINE
# ("?" when absent).
fn_field() {
	local w
	for w in $1; do
		[[ $w == "$2="* ]] && { echo "${w#*=}"; return 0; }
	done
	echo "?"
}
