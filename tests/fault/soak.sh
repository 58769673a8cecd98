#!/usr/bin/env bash
# The soak, by hand (not a CI test): one run of the fault suite
# (tests/fault/run.sh) for an hour under its constant load and random
# faults, and beside it a sampler that records, every 15 s, each member
# process's resident memory (RSS and PSS, /proc/PID/smaps_rollup), its
# open descriptors (/proc/PID/fd) and, for a cetcd member, the tmpfs its
# region holds, into DIR/soak.csv. Then the verdict: every series must
# stay flat, within 10% of its level after the first five minutes, and
# the run must find no anomaly.
#
# usage: tests/fault/soak.sh [-t SECONDS] [-i SECONDS] [-l SECONDS]
#            [-f FAULT[,FAULT...]] [-c cetcd|mixed] [-w WORKLOAD] [-s SEED]
#            [-o DIR]
#        tests/fault/soak.sh -j CSV [-l SECONDS] [-f FAULT[,FAULT...]]
#   -t  how long the workload runs (default 3600); run.sh's nemeses stop
#       at 4/5 of it
#   -i  seconds between two samples (default 15)
#   -l  the window of the verdict, in seconds of a process's age
#       (default 300; see the verdict)
#   -f  run.sh's fault kinds (default: the ones that restart no process,
#       below)
#   -c, -w, -s, -o  run.sh's (default cetcd, register, a fresh seed, a
#       new /tmp/cetcd-soak.XXXXXX)
#   -j  no run: the verdict on a saved CSV (soak.csv), for a second look
#       with another -l, or for a check of the verdict itself
# Run it as the fault suite is run, as root inside a PID namespace of its
# own, the output in files:
#     unshare -p -f --mount-proc bash tests/fault/soak.sh -o DIR >DIR.line 2>DIR.err
# The sampler is a child of this script, so it sees the members' pids in
# the namespace run.sh starts them in; it finds them by their command
# line: a launcher (cetcd) or an etcd member runs with --data-dir
# DIR/<member>, its daemons (raftd, stored, gatewayd-N) are its children.
# The script is read whole before it runs (main, at the end), so an
# editor or a checkout that changes it does not disturb a running soak;
# do not rebuild the programs under one (the launcher starts a daemon
# again from its bin dir).
#
# The CSV, one row per process and sample: t_s (seconds since the
# workload's history appeared), member, daemon (cetcd, the launcher;
# raftd, stored, gatewayd-N, corrupt-check, auto-compact; etcd), pid,
# age_s (the process's age, from /proc/PID/stat), rss_kb, pss_kb, fds,
# tmpfs_kb (a launcher's row only: the blocks of the files of its
# runtime dir and of the unnamed region its descriptors hold), anon_kb,
# file_kb, shmem_kb (the RSS by kind, /proc/PID/status: RssAnon, the
# memory the process allocated; RssFile, file pages it maps; RssShmem,
# the region). Sampling
# stops when the workload's -t seconds are over, so the quiet end (final
# reads, checks, shutdown) is no part of it.
#
# The verdict (stated here alone: docs/design.md and
# tests/integration/soak_verdict.sh refer to it). A series is one metric
# of one process (member, daemon, pid): rss_kb, pss_kb, anon_kb, fds or
# tmpfs_kb (file_kb and shmem_kb are recorded, not judged), cut into
# windows of L seconds of the process's age (L = -l, 300: five minutes;
# age from /proc/PID/stat). A window's level is the 90th percentile of
# its samples: what the process holds at the top of its cycles. The
# series' level is its second window's (300 to 600 s old: after the
# first five minutes); each later window's level must lie within max(10%
# of it, a floor), above or below. Windows, not single samples, and
# their tops, not their medians: raftd's memory is a sawtooth of a
# minute or two (its in-memory log until the next snapshot,
# --snapshot-count entries) and the region's rings give their pages back
# a second after a burst, so a sample, and a window's median with it,
# may lie tens of per cent off a level that does not move, while the
# tops of the cycles stay put and a leak lifts them. The floors keep
# small series from failing on a step of one: 5 descriptors (20 open
# then 23 passes, 26 does not), 1024 kB of RSS, PSS, anon or tmpfs. A
# window counts with 3 samples. A restart gives a new pid and a new
# series, whose own age starts again, so a leak that restarts would hide
# behind them: a member's daemon none of whose processes lived into its
# third window (2L seconds) is "not judged", which is not flat. By
# default the soak draws only fault kinds that restart no process:
# partitions, loss, reordering, a slow link, a client port cut, SIGSTOP
# of a member or of a daemon, wall clock steps (isolate, split, bridge,
# oneway, loss, reorder, slow, clientcut, pause, pause-daemon, clock);
# every process then lives the whole run, and a second pid for a
# member's daemon is a crash, reported as "restarted", not flat. With
# kinds that restart a process (kill, kill-daemon, disk, full, crash,
# remove-readd, replace, or the groups proc, all, storage, member:
# tests/fault/lib.sh says what each does) restarts are expected and only
# long-lived processes are judged. Prints a line for each series that
# breaks the rule (and each restart or daemon not judged), writes every
# series' level, min and max to DIR/soak.levels (with the level of the
# window farthest from it), then one line on stdout: run.sh's, with
# flat=1|0 added. Exit status: run.sh's when it is not 0 (an anomaly, a
# member that did not come back, a setup error), else 1 when not flat,
# else 0. -j prints the same verdict and flat=1|0, and exits 1 when not
# flat.
set -euo pipefail
SOAK_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# (for it_fresh_seed)
source "$SOAK_HERE/../integration/lib.sh"
SOAK_QUIET_KINDS=isolate,split,bridge,oneway,loss,reorder,slow,clientcut,pause,pause-daemon,clock
# the kinds that restart a process (a member, a daemon) and the groups
# that hold one
SOAK_RESTART_KINDS="kill kill-daemon disk full crash remove-readd replace proc all storage member"

soak_usage() {
	sed -n '/^# usage:/,/^#       with another -l/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# soak_restarts FAULTS: 1 when a kind (or group) of FAULTS restarts a
# process, else 0.
soak_restarts() {
	local k
	for k in ${1//,/ }; do
		[[ " $SOAK_RESTART_KINDS " == *" $k "* ]] && { echo 1; return 0; }
	done
	echo 0
}

# soak_sample RUNDIR CSV INTERVAL SECS PID: samples the members of the
# run in RUNDIR every INTERVAL seconds into CSV, from the moment the
# workload's history appears until SECS seconds later or until PID
# (run.sh) is gone.
soak_sample() {
	python3 - "$@" <<'EOF'
import glob, os, sys, time

rundir, csv, interval, secs, runpid = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
hz = os.sysconf("SC_CLK_TCK")
progs = ("cetcd", "raftd", "stored", "gatewayd", "etcd")

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

def argv(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]

def flag(args, name):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None

def ppid_age(pid, now_up):
    with open("/proc/%d/stat" % pid) as f:
        w = f.read().rsplit(")", 1)[1].split()
    return int(w[1]), now_up - int(w[19]) / hz

def memory(pid):
    rss = pss = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    # RSS by kind: what the process allocated, the file pages it maps
    # (the db, WAL segments read back), the shared memory (the region)
    kinds = {"RssAnon:": 0, "RssFile:": 0, "RssShmem:": 0}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            w = line.split()
            if w and w[0] in kinds:
                kinds[w[0]] = int(w[1])
    return rss, pss, kinds["RssAnon:"], kinds["RssFile:"], kinds["RssShmem:"]

def tmpfs_kb(pid, rt):
    # the blocks of the files in the runtime dir, and of the files there
    # (the unnamed region among them) that the launcher holds open
    seen, kb = set(), 0
    paths = []
    for root, _, files in os.walk(rt):
        paths += [os.path.join(root, n) for n in files]
    for fd in os.listdir("/proc/%d/fd" % pid):
        p = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(p).startswith(rt.rstrip("/") + "/"):
                paths.append(p)
        except OSError:
            pass
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            kb += st.st_blocks // 2
    return kb

def daemon(pid, args):
    prog = os.path.basename(args[0])
    if prog == "gatewayd":
        return "gatewayd-" + (flag(args, "--gateway-index") or "?")
    if prog == "cetcd":
        try:
            env = open("/proc/%d/environ" % pid, "rb").read().split(b"\0")
        except OSError:
            env = []
        if b"CETCD_CORRUPT_MONITOR=1" in env:
            return "corrupt-check"
        if b"CETCD_AUTO_COMPACTOR=1" in env:
            return "auto-compact"
    return prog

def sample(t, out):
    with open("/proc/uptime") as f:
        now_up = float(f.read().split()[0])
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        try:
            args = argv(pid)
            if not args or os.path.basename(args[0]) not in progs:
                continue
            data = flag(args, "--data-dir")
            if not data or os.path.dirname(os.path.abspath(data)) != rundir:
                continue
            ppid, age = ppid_age(pid, now_up)
            procs[pid] = (args, data, ppid, age)
        except (OSError, IndexError, ValueError):
            continue
    rows = []
    for pid, (args, data, ppid, age) in procs.items():
        member = os.path.basename(data)
        # a launcher's child runs with the launcher's flags
        if ppid in procs and procs[ppid][1] == data:
            name = daemon(pid, args)
        else:
            name = os.path.basename(args[0])
        try:
            rss, pss, anon, filekb, shmem = memory(pid)
            fds = len(os.listdir("/proc/%d/fd" % pid))
            tm = ""
            if name == "cetcd" and flag(args, "--runtime-dir"):
                tm = str(tmpfs_kb(pid, flag(args, "--runtime-dir")))
        except OSError:
            continue  # gone meanwhile
        rows.append("%d,%s,%s,%d,%d,%d,%d,%d,%s,%d,%d,%d\n" %
                    (t, member, name, pid, age, rss, pss, fds, tm, anon, filekb, shmem))
    out.writelines(sorted(rows, key=lambda r: r.split(",")[1:3]))
    out.flush()

# the workload's start: its history's first line
while not glob.glob(os.path.join(rundir, "*.jsonl")):
    if not alive(runpid):
        sys.exit(0)
    time.sleep(0.2)
t0 = time.monotonic()
with open(csv, "w") as out:
    out.write("t_s,member,daemon,pid,age_s,rss_kb,pss_kb,fds,tmpfs_kb,anon_kb,file_kb,shmem_kb\n")
    n = 0
    while alive(runpid):
        t = time.monotonic() - t0
        if t > secs:
            break
        sample(t, out)
        n += 1
        time.sleep(max(0.0, t0 + n * interval - time.monotonic()))
EOF
}

# soak_judge CSV LEVEL RESTARTS LEVELS: the verdict on CSV with windows
# of LEVEL seconds of age; RESTARTS 1 when the faults restart
# processes. Writes each series' figures to LEVELS (when not empty),
# prints a line per series that breaks the rule, then flat=1|0 as the
# last line; status 0 only when flat.
soak_judge() {
	python3 - "$@" <<'EOF'
import csv, statistics, sys

path, W, restarts, levels = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
FLOOR = {"rss_kb": 1024, "pss_kb": 1024, "fds": 5, "tmpfs_kb": 1024, "anon_kb": 1024}
SHARE = 0.10
FEWEST = 3  # samples that make a window

def top(vs):
    # a window's level: the 90th percentile of its samples
    return statistics.quantiles(vs, n=10, method="inclusive")[8]

procs = {}  # (member, daemon, pid) -> [(t, age, {metric: value})]
with open(path) as f:
    for r in csv.DictReader(f):
        vals = {m: int(r[m]) for m in FLOOR if r.get(m, "") != ""}
        procs.setdefault((r["member"], r["daemon"], int(r["pid"])), []).append(
            (float(r["t_s"]), float(r["age_s"]), vals))

flat = bool(procs)
if not procs:
    print("no samples in %s" % path)
table = ["# member daemon metric pid first_t_s last_t_s level min max farthest_window_level verdict"]
keys, judged = {}, set()
for (member, dmn, pid), rows in sorted(procs.items()):
    keys.setdefault((member, dmn), []).append(pid)
    first, last = rows[0][0], rows[-1][0]
    for m in FLOOR:
        # the windows of age [kW, (k+1)W): 1 gives the level, 2... are judged
        wins = {}
        for t, a, v in rows:
            if m in v and a >= W:
                wins.setdefault(int(a // W), []).append(v[m])
        wins = {k: vs for k, vs in wins.items() if len(vs) >= FEWEST}
        if not any(m in v for _, _, v in rows):
            continue
        if 1 not in wins or not any(k >= 2 for k in wins):
            table.append("%s %s %s %d %d %d - - - - short-lived" % (member, dmn, m, pid, first, last))
            continue
        level = top(wins[1])
        allowed = max(SHARE * level, FLOOR[m])
        later = [v for k, vs in wins.items() if k >= 2 for v in vs]
        k, med = max(((k, top(vs)) for k, vs in wins.items() if k >= 2),
                     key=lambda km: abs(km[1] - level))
        ok = abs(med - level) <= allowed
        judged.add((member, dmn))
        table.append("%s %s %s %d %d %d %g %d %d %g %s" % (member, dmn, m, pid, first, last, level,
                     min(later), max(later), med, "flat" if ok else "NOT-FLAT"))
        if not ok:
            flat = False
            print("not flat: %s %s %s pid %d: level %g (at %d-%d s of age), %g at %d-%d s "
                  "(%+.1f%%; allowed +-%.0f), max %d" % (member, dmn, m, pid, level, W, 2 * W, med, k * W,
                  (k + 1) * W, 100.0 * (med - level) / level if level else float("inf"), allowed, max(later)))
for (member, dmn), pids in sorted(keys.items()):
    if len(pids) > 1 and not restarts:
        flat = False
        print("restarted: %s %s: pids %s (no fault kind of this soak restarts a process: a crash?)" %
              (member, dmn, " ".join(map(str, pids))))
    if (member, dmn) not in judged:
        flat = False
        print("not judged: %s %s: no process of it has a level and a later window (%d s of age)" %
              (member, dmn, 2 * W))
if levels:
    with open(levels, "w") as f:
        f.write("\n".join(table) + "\n")
print("flat=%d" % flat)
sys.exit(0 if flat else 1)
EOF
}

main() {
	local secs=3600 every=15 level=300 faults=$SOAK_QUIET_KINDS cluster=cetcd workload=register
	local seed='' dir='' judge='' o
	while getopts "t:i:l:f:c:w:s:o:j:h" o; do
		case $o in
		t) secs=$OPTARG ;;
		i) every=$OPTARG ;;
		l) level=$OPTARG ;;
		f) faults=$OPTARG ;;
		c) cluster=$OPTARG ;;
		w) workload=$OPTARG ;;
		s) seed=$OPTARG ;;
		o) dir=$OPTARG ;;
		j) judge=$OPTARG ;;
		*) soak_usage ;;
		esac
	done
	[[ $secs =~ ^[1-9][0-9]*$ && $every =~ ^[1-9][0-9]*$ && $level =~ ^[1-9][0-9]*$ ]] || soak_usage
	[[ -z $seed || $seed =~ ^[0-9]+$ ]] || soak_usage
	command -v python3 >/dev/null || { echo "SKIP: python3 is not installed" >&2; exit 77; }
	if [[ -n $judge ]]; then
		[[ -r $judge ]] || { echo "no such CSV: $judge" >&2; exit 2; }
		soak_judge "$judge" "$level" "$(soak_restarts "$faults")" ""
		return
	fi
	((3 * level <= secs)) || { echo "-l $level: a process is judged on 3 windows of $level s, more than -t $secs" >&2; exit 2; }

	[[ -n $seed ]] || seed=$(it_fresh_seed)
	if [[ -z $dir ]]; then
		dir=$(mktemp -d /tmp/cetcd-soak.XXXXXX)
	else
		mkdir -p "$dir"
	fi
	dir=$(cd "$dir" && pwd)
	echo "soak: seed=$seed cluster=$cluster faults=$faults t=${secs}s every ${every}s level at ${level}s dir=$dir" >&2
	echo "soak: replay: unshare -p -f --mount-proc bash tests/fault/soak.sh -t $secs -i $every -l $level -f $faults -c $cluster -w $workload -s $seed -o DIR" >&2

	local run st=0 sampler line
	bash "$SOAK_HERE/run.sh" -t "$secs" -f "$faults" -c "$cluster" -w "$workload" -s "$seed" -o "$dir" \
		>"$dir/soak.run.out" 2>"$dir/soak.run.err" &
	run=$!
	# an interrupted soak stops run.sh, which stops its cluster
	trap 'kill -TERM "$run" 2>/dev/null || true' INT TERM
	soak_sample "$dir" "$dir/soak.csv" "$every" "$secs" "$run" 2>"$dir/soak.sampler.err" &
	sampler=$!
	wait "$run" || st=$?
	wait "$sampler" || echo "soak: the sampler failed (status $?): $dir/soak.sampler.err" >&2
	trap - INT TERM
	line=$(tail -n 1 "$dir/soak.run.out" 2>/dev/null || true)
	[[ -n $line ]] || { echo "soak: run.sh printed no line: $dir/soak.run.err" >&2; line="seed=$seed dir=$dir"; }
	local verdict flat
	if [[ -s $dir/soak.csv ]]; then
		verdict=$(soak_judge "$dir/soak.csv" "$level" "$(soak_restarts "$faults")" "$dir/soak.levels") || true
	else
		verdict="no samples (the workload never started: $dir/soak.run.err)"$'\n'"flat=0"
	fi
	flat=${verdict##*$'\n'}
	[[ $verdict == *$'\n'* ]] && printf '%s\n' "${verdict%$'\n'*}" >&2
	echo "$line $flat"
	((st == 0)) || exit "$st"
	[[ $flat == flat=1 ]]
}

main "$@"
exit
