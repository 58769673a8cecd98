#!/usr/bin/env python3
"""Watch latency as the wire shows it, from a capture of etcd's benchmark
tool running watch-latency (one connection puts, the others watch).

    tcpdump -nn -tt -r CAPTURE | bench/watch-wire.py SERVER_PORT...

The tool's own figure is the time from the put's answer reaching the
client to each watcher's event reaching it, so the client's own work is
most of it on a small machine. Here the times are those of the packets
on loopback, which the client's scheduling does not move:

  write_to_event   from the put request's segment to the segment carrying
                   the last watch event of that put (what a watcher waits
                   for a write, the commit included)
  ack_to_event     from the put's answer to that last event segment;
                   negative when every event left before the answer

Prints "write_p50_ms write_p99_ms ack_p99_ms puts" (0 0 0 0 when the
capture holds no put). Segments of at most 30 bytes are HTTP/2 control
frames (PING, WINDOW_UPDATE, both together) and are skipped; the
connection whose client sent the most longer segments is the putter's,
and each longer segment the server sends on another connection counts
for the last put request before it (the tool waits for every watcher
before its next put).
"""
import bisect
import collections
import re
import sys

CONTROL_MAX = 30


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ports = set(sys.argv[1:])
    seg = re.compile(r"^(\d+\.\d+) IP [\d.]+\.(\d+) > [\d.]+\.(\d+): .* length (\d+)")
    segs = []  # (time, client port, from server, length)
    for line in sys.stdin:
        m = seg.match(line)
        if not m or int(m.group(4)) <= CONTROL_MAX:
            continue
        t, src, dst, n = float(m.group(1)), m.group(2), m.group(3), int(m.group(4))
        if src in ports:
            segs.append((t, dst, True, n))
        elif dst in ports:
            segs.append((t, src, False, n))
    sent = collections.Counter(c for _, c, from_server, _ in segs if not from_server)
    if not sent:
        print("0 0 0 0")
        return
    putter = sent.most_common(1)[0][0]
    requests = [t for t, c, from_server, _ in segs if c == putter and not from_server]
    answer = {}
    last_event = {}
    for t, c, from_server, _ in segs:
        if not from_server:
            continue
        j = bisect.bisect_right(requests, t) - 1
        if j < 0:
            continue
        if c == putter:
            answer.setdefault(j, t)
        else:
            last_event[j] = max(last_event.get(j, t), t)
    write, ack = [], []
    for j, ta in answer.items():
        if j in last_event:
            write.append(last_event[j] - requests[j])
            ack.append(last_event[j] - ta)
    if not write:
        print("0 0 0 0")
        return
    print("%.3f %.3f %.3f %d" % (quantile(write, 0.5) * 1e3, quantile(write, 0.99) * 1e3,
                                 quantile(ack, 0.99) * 1e3, len(write)))


if __name__ == "__main__":
    main()
