#!/usr/bin/env bash
# Durable means fsynced, directories too: a member started on a fresh data
# dir runs under strace, and every directory and file its processes create
# there (the data dir, member/, member/wal/, member/snap/, the db file, WAL
# segments), and every name a rename gives, must be followed by an fsync
# of the directory that holds it. Temporary files (*.tmp) that are renamed
# before they count are exempt. When etcdctl is installed a write goes
# through the member first. A second member does the same with --wal-dir
# in a directory of its own (created with its parents and fsynced, as
# etcd's wal package does), and its data dir never gets a member/wal.
# Exits 77 when strace (Debian package strace), the programs, python3 or
# curl are missing, or when ptrace is not permitted here.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_program strace "Debian package strace"
strace -f -qq -o /dev/null true 2>/dev/null || it_skip "ptrace is not permitted here (strace fails)"
it_init dir-fsync

# The launcher under strace; stopped through the launcher itself, so that
# strace sees every process to its end.
it_cetcd_restart() {
	IT_CETCD_LOG=$1
	strace -f -qq -y -s 512 -o "$trace" \
		-e trace=mkdir,mkdirat,open,openat,rename,renameat,renameat2,fsync,fdatasync \
		"$IT_BIN/cetcd" "${IT_CETCD_ARGS[@]}" 2>>"$IT_CETCD_LOG" &
	IT_STRACE_PID=$!
	it_track "$IT_STRACE_PID"
	it_until 5000 pgrep -P "$IT_STRACE_PID" >/dev/null
	IT_CETCD_PID=$(pgrep -P "$IT_STRACE_PID" | head -1)
	it_track "$IT_CETCD_PID"
}

# The verdict on a trace: every creation or rename inside IT_TMP followed
# by an fsync of its directory; prints what it saw.
cat >"$IT_TMP/verdict.py" <<'EOF'
import os, re, sys

trace, root = sys.argv[1], os.path.realpath(sys.argv[2])
pending = {}
calls = []  # (syscall, text of the args and result), in completion order
for line in open(trace, errors="replace"):
    m = re.match(r"(\d+)\s+(.*)$", line.rstrip("\n"))
    if not m:
        continue
    pid, text = m.groups()
    if text.endswith("<unfinished ...>"):
        pending[pid] = text[: -len("<unfinished ...>")]
        continue
    r = re.match(r"<\.\.\. (\w+) resumed>(.*)$", text)
    if r:
        text = pending.pop(pid, r.group(1) + "(") + r.group(2)
    c = re.match(r"(\w+)\((.*)\)\s+=\s+(-?\d+)", text)
    if c:
        calls.append((c.group(1), c.group(2), int(c.group(3))))

def resolve(dirfd_text, name):
    if name.startswith("/"):
        return os.path.normpath(name)
    m = re.match(r"\d+<([^>]*)>", dirfd_text or "")
    base = m.group(1) if m else os.getcwd()
    return os.path.normpath(os.path.join(base, name))

need = []  # (index of the call, what, directory that must be fsynced after)
synced = []  # (index, directory)
for i, (name, args, ret) in enumerate(calls):
    parts = [a.strip() for a in re.split(r",\s*(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", args)]
    def q(s):
        return s[1:-1] if s.startswith('"') else s
    if name in ("fsync", "fdatasync") and ret == 0:
        m = re.match(r"\d+<([^>]*)>", parts[0])
        if m:
            synced.append((i, os.path.normpath(m.group(1))))
        continue
    if ret < 0:
        continue
    if name == "mkdir":
        p = resolve(None, q(parts[0]))
        need.append((i, "mkdir " + p, os.path.dirname(p)))
    elif name == "mkdirat":
        p = resolve(parts[0], q(parts[1]))
        need.append((i, "mkdir " + p, os.path.dirname(p)))
    elif name in ("open", "openat") and "O_CREAT" in args:
        p = resolve(None, q(parts[0])) if name == "open" else resolve(parts[0], q(parts[1]))
        if not p.endswith(".tmp"):
            need.append((i, "create " + p, os.path.dirname(p)))
    elif name == "rename":
        p = resolve(None, q(parts[1]))
        need.append((i, "rename to " + p, os.path.dirname(p)))
    elif name in ("renameat", "renameat2"):
        p = resolve(parts[2], q(parts[3]))
        need.append((i, "rename to " + p, os.path.dirname(p)))

inside = [n for n in need if n[1].split(" ")[-1].startswith(root + "/")]
missing = [n for n in inside if not any(j > n[0] and d == n[2] for j, d in synced)]
names = sorted(set(n[1].split(" ")[-1] for n in inside))
print("created-or-renamed %d" % len(inside))
for n in names:
    print("  seen " + os.path.relpath(n, root))
for n in missing:
    print("missing fsync of %s after %s" % (n[2], n[1]))
sys.exit(1 if missing or not inside else 0)
EOF

put_one() { etcdctl --endpoints "127.0.0.1:$IT_CPORT" put dir-fsync v >/dev/null; }

# traced_run NAME DATA_DIR [flags...]: a member under strace on DATA_DIR,
# a put, a stop; checks that what it created was fsynced (the verdict in
# IT_TMP/NAME.verdict).
traced_run() {
	local name=$1 data=$2 st=0
	shift 2
	trace=$IT_TMP/$name.strace
	IT_CPORT=
	it_cetcd_start "$name" "$data" "$IT_TMP/$name.log" "$@"
	if ! it_wait_healthy "$IT_CPORT" 60; then
		fail "$name: the member answers under strace"
		tail -20 "$IT_TMP/$name.log"
		it_summary
		exit 1
	fi
	ok "$name: the member answers under strace"
	if command -v etcdctl >/dev/null; then
		check "$name: a put is acknowledged" put_one
	fi
	kill -TERM "$IT_CETCD_PID" 2>/dev/null || true
	check "$name: the member stops on SIGTERM" it_wait_gone "$IT_CETCD_PID" 15000
	it_wait_gone "$IT_STRACE_PID" 15000 || true
	wait "$IT_STRACE_PID" 2>/dev/null || true

	check "$name: strace recorded the member" test -s "$trace"
	python3 "$IT_TMP/verdict.py" "$trace" "$IT_TMP" >"$IT_TMP/$name.verdict" || st=$?
	cat "$IT_TMP/$name.verdict"
	check "$name: every directory and file created or renamed has its parent fsynced after" test "$st" -eq 0
}

# seen NAME PATH: the trace of NAME saw PATH (relative to IT_TMP) created.
seen() { grep -qx "  seen $2" "$IT_TMP/$1.verdict"; }

traced_run d1 "$IT_TMP/data/nested"
for want in data data/nested data/nested/member data/nested/member/wal data/nested/member/snap data/nested/member/snap/db; do
	check "d1: strace saw $want created" seen d1 "$want"
done

traced_run d2 "$IT_TMP/data2" --wal-dir "$IT_TMP/wal/nested/w"
for want in data2/member data2/member/snap/db wal wal/nested wal/nested/w \
	wal/nested/w.tmp/0000000000000000-0000000000000000.wal; do
	check "d2: strace saw $want created" seen d2 "$want"
done
check "d2: its data dir has no member/wal" test ! -e "$IT_TMP/data2/member/wal"
it_summary
