#!/usr/bin/env python3
"""Where one client's put spends its time, from a scheduler and syscall trace.

Reads `perf script -F comm,pid,tid,cpu,time,event,trace` of a run of puts
sent one at a time (bench/put-stages.sh records it) on stdin, with the pids
of the member's gatewayd, raftd and stored as arguments, and prints each
stage's median and mean in microseconds over the puts whose every step was
seen:

  client -> gatewayd   the client's request wakes gatewayd, which reads it
  decode+propose       gatewayd's read until it rings raftd
  raftd wakes          ring until raftd runs
  raftd -> WAL         raftd runs until the WAL's fdatasync is submitted
                       (with the batch's copy into the page cache, when
                       raftd makes it itself: base/diskio/diskio_uring.c)
  WAL write+sync       fdatasync submitted until it completes (io_uring;
                       with the copy when the worker thread makes it)
  raftd wakes again    sync completion until raftd runs
  raftd commit         raftd runs until it rings stored
  stored wakes         ring until stored runs
  stored apply         stored runs until its first pwrite of db pages
  stored commit        first pwrite until stored rings gatewayd
  gatewayd wakes       ring until gatewayd runs
  answer written       gatewayd runs until the answer reaches the client's
                       socket (the client is woken)
  client reads         until the client's read of the answer returns

A step absent from a put (stored still spinning when raftd handed it the
entry, so no ring) drops that put; the count of puts kept is printed.
"""
import re
import statistics
import sys

LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)$")

STAGES = ["client -> gatewayd", "decode+propose", "raftd wakes", "raftd -> WAL",
          "WAL write+sync", "raftd wakes again", "raftd commit", "stored wakes",
          "stored apply", "stored commit", "gatewayd wakes", "answer written",
          "client reads"]


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: put-stages.py GATEWAYD_PID RAFTD_PID STORED_PID < perf-script-output")
    gw, raft, st = (int(a) for a in sys.argv[1:])
    puts, cur = [], None
    step = 0
    fsync_req = None
    client = None  # the client's thread
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tid, t, ev, rest = m.group(1), int(m.group(2)), int(m.group(3)), \
            float(m.group(4)) * 1e6, m.group(5), m.group(6)
        # a new put: the client wakes gatewayd (its request is in)
        if pid not in (gw, raft, st) and ev == "sched:sched_wakeup" and \
                f"pid={gw} " in rest:
            if cur is not None and len(cur) == 14:
                puts.append(cur)
            cur, step, client = [t], 1, tid
            continue
        if cur is None:
            continue
        main_thread = pid == tid
        if step == 1 and pid == gw and ev == "raw_syscalls:sys_exit" and \
                rest.startswith("NR 0 ") and not rest.endswith("= -11"):
            cur.append(t); step = 2
        elif step == 2 and pid == gw and ev == "sched:sched_wakeup" and f"pid={raft} " in rest:
            cur.append(t); step = 3
        elif step == 3 and pid == raft and main_thread:
            cur.append(t); step = 4
        elif step == 4 and pid == raft and ev == "io_uring:io_uring_submit_req" and "opcode FSYNC" in rest:
            fsync_req = rest.split("req ")[1].split(",")[0]
            cur.append(t); step = 5
        elif step == 5 and ev == "io_uring:io_uring_complete" and f"req {fsync_req}," in rest:
            cur.append(t); step = 6
        elif step == 6 and pid == raft and main_thread:
            cur.append(t); step = 7
        elif step == 7 and pid == raft and ev == "sched:sched_wakeup" and f"pid={st} " in rest:
            cur.append(t); step = 8
        elif step == 8 and pid == st and main_thread:
            cur.append(t); step = 9
        elif step == 9 and pid == st and ev == "raw_syscalls:sys_enter" and \
                (rest.startswith("NR 18 ") or rest.startswith("NR 296 ")):
            cur.append(t); step = 10
        elif step == 10 and pid == st and ev == "sched:sched_wakeup" and f"pid={gw} " in rest:
            cur.append(t); step = 11
        elif step == 11 and pid == gw:
            cur.append(t); step = 12
        elif step == 12 and pid == gw and ev == "sched:sched_wakeup" and f"pid={client} " in rest:
            cur.append(t); step = 13
        elif step == 13 and tid == client and ev == "raw_syscalls:sys_exit" and \
                rest.startswith("NR 0 ") and not rest.endswith("= -11"):
            cur.append(t); step = 14
    if cur is not None and len(cur) == 14:
        puts.append(cur)
    if not puts:
        sys.exit("put-stages: no put with every step seen")
    print(f"puts with every step seen: {len(puts)}")
    print(f"{'stage':22} {'median us':>10} {'mean us':>10}")
    for i, name in enumerate(STAGES):
        d = [p[i + 1] - p[i] for p in puts]
        print(f"{name:22} {statistics.median(d):10.1f} {statistics.mean(d):10.1f}")
    for name, a, b in (("gatewayd read -> answer", 1, 12), ("without WAL write+sync", None, None),
                       ("client send -> read", 0, 13)):
        if a is None:
            d = [(p[12] - p[1]) - (p[5] - p[4]) for p in puts]
        else:
            d = [p[b] - p[a] for p in puts]
        print(f"{name:22} {statistics.median(d):10.1f} {statistics.mean(d):10.1f}")


if __name__ == "__main__":
    main()
