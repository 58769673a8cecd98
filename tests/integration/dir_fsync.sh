#!/usr/bin/env bash
# Durable means fsynced, directories too: a member started on a fresh data
# dir runs under strace, and every directory and file its processes create
# there (the data dir, member/, member/wal/, member/snap/, the db file, WAL
# segments), and every name a rename gives, must be followed by an fsync
# of the directory that holds it. Temporary files (*.tmp) that are renamed
# before they count are exempt. When etcdctl is installed a write goes
# through the member first.
# Exits 77 when strace (Debian package strace), the programs, python3 or
# curl are missing, or when ptrace is not permitted here.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
command -v strace >/dev/null || it_skip "strace is not installed (Debian package strace)"
strace -f -qq -o /dev/null true 2>/dev/null || it_skip "ptrace is not permitted here (strace fails)"
it_init dir-fsync

trace=$IT_TMP/strace.log
data=$IT_TMP/data/nested

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

it_cetcd_start d1 "$data" "$IT_TMP/cetcd.log"
if ! it_wait_healthy "$IT_CPORT" 60; then
	fail "the member answers under strace"
	tail -20 "$IT_TMP/cetcd.log"
	it_summary
	exit 1
fi
ok "the member answers under strace"
if command -v etcdctl >/dev/null; then
	check "a put is acknowledged" etcdctl --endpoints "127.0.0.1:$IT_CPORT" put dir-fsync v >/dev/null
fi
kill -TERM "$IT_CETCD_PID" 2>/dev/null || true
check "the member stops on SIGTERM" it_wait_gone "$IT_CETCD_PID" 15000
it_wait_gone "$IT_STRACE_PID" 15000 || true
wait "$IT_STRACE_PID" 2>/dev/null || true

check "strace recorded the member" test -s "$trace"
st=0
python3 - "$trace" "$IT_TMP" >"$IT_TMP/verdict" <<'EOF' || st=$?
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
cat "$IT_TMP/verdict"
check "every directory and file created or renamed in the data dir has its parent fsynced after" test "$st" -eq 0
for want in data data/nested data/nested/member data/nested/member/wal data/nested/member/snap data/nested/member/snap/db; do
	check "strace saw $want created" grep -qx "  seen $want" "$IT_TMP/verdict"
done
it_summary
