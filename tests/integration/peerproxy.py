#!/usr/bin/env python3
"""A TCP proxy in front of each member's peer port that can cut members off.

    peerproxy.py CONTROL LISTEN:TARGET [LISTEN:TARGET ...]

Each LISTEN port (on 127.0.0.1) forwards to TARGET (a member's real peer
port), which the members advertise as the member's peer URL, so every
peer connection to a member goes through its proxy. etcd's rafthttp names
the dialing member in every request head (X-Server-From, hex id), so for
each connection the proxy knows both ends: the member behind the port it
came to and, from the head, the member that dialed.

CONTROL is a file of lines "behind PORT ID" (the member, hex id, whose
peer port the proxy's PORT fronts) and "cut ID" (a member cut off). A
connection is refused, and an open one closed at once, when either end is
cut off, so a cut-off member neither hears nor reaches the others in
either direction, as behind a network partition. The proxy polls CONTROL
every 20 ms; an absent file cuts no one. The proxy reads only the first
request head of a connection, and etcd reuses a connection opened for a
request without X-Server-From (/raft/probing, /members, /version) for
raft messages, so while anyone is cut off such connections are refused
and closed too.

The proxy prints "ready" on stdout once it listens, "cut at MS: IDS" when
it applies a new CONTROL (MS: unix time in ms, when the cut took effect),
and a line for each refused or cut connection.
"""
import asyncio
import os
import sys
import time

HEAD_MAX = 65536


class Proxy:
    def __init__(self, control):
        self.control = control
        self.cut = set()
        self.mtime = None
        self.behind = {}  # listen port -> member id, from CONTROL
        self.conns = set()  # (listen port, sender id or None, writers)

    def is_cut(self, port, sender):
        if self.cut and sender is None:
            # a keep-alive connection opened for /raft/probing (no sender)
            # is reused by etcd's pipeline for messages, so it may carry
            # anybody's: none passes while someone is cut off
            return True
        target = self.behind.get(port)
        return sender in self.cut or (target is not None and target in self.cut)

    async def poll(self):
        while True:
            try:
                st = os.stat(self.control)
                m = (st.st_ino, st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                m = None
            if m != self.mtime:
                self.mtime = m
                cut, behind = set(), {}
                try:
                    with open(self.control) as f:
                        for line in f:
                            w = line.split()
                            if len(w) == 2 and w[0] == "cut":
                                cut.add(w[1].lower())
                            elif len(w) == 3 and w[0] == "behind":
                                behind[int(w[1])] = w[2].lower()
                except FileNotFoundError:
                    pass
                self.cut, self.behind = cut, behind
                print("cut at %d: %s" % (time.time_ns() // 1000000, ",".join(sorted(self.cut)) or "none"), flush=True)
                for c in list(self.conns):
                    port, sender, ws = c
                    if self.is_cut(port, sender):
                        print(f"closing a connection to :{port} from {sender}", flush=True)
                        for w in ws:
                            w.close()
                        self.conns.discard(c)
            await asyncio.sleep(0.02)

    async def pipe(self, r, w):
        try:
            while True:
                b = await r.read(65536)
                if not b:
                    break
                w.write(b)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()

    async def serve(self, port, target, r, w):
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < HEAD_MAX:
                b = await r.read(4096)
                if not b:
                    w.close()
                    return
                head += b
        except (ConnectionError, OSError):
            w.close()
            return
        sender = None
        for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"x-server-from":
                sender = v.strip().decode("latin-1").lower()
        if self.is_cut(port, sender):
            print(f"refused a connection to :{port} from {sender}", flush=True)
            w.close()
            return
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            w.close()
            return
        uw.write(head)
        c = (port, sender, (w, uw))
        self.conns.add(c)
        if self.is_cut(port, sender):
            # cut while this connection was being made
            for x in c[2]:
                x.close()
            self.conns.discard(c)
            return
        print("%d: passing a connection to :%d from %s: %s" % (time.time_ns() // 1000000, port, sender, head.split(b"\r\n", 1)[0].decode("latin-1")), flush=True)
        await asyncio.gather(self.pipe(r, uw), self.pipe(ur, w))
        self.conns.discard(c)


async def main():
    p = Proxy(sys.argv[1])
    for spec in sys.argv[2:]:
        lp, tp = (int(x) for x in spec.split(":"))
        await asyncio.start_server(lambda r, w, lp=lp, tp=tp: p.serve(lp, tp, r, w), "127.0.0.1", lp)
    print("ready", flush=True)
    await p.poll()


asyncio.run(main())
