#!/usr/bin/env python3
"""A raw HTTP/2 client for the keepalive tests (tests/integration/grpc_keepalive.sh).

    h2ping.py PORT MODE [ARG]

It connects to 127.0.0.1:PORT, sends the client preface and an empty
SETTINGS, acknowledges the server's SETTINGS, then, by MODE:

  flood N        sends N PINGs at once, without a stream open
  stream MS N    opens a gRPC Watch stream (HEADERS without END_STREAM,
                 so it stays open) and sends N PINGs, one every MS ms
  silent S       sends nothing more for S seconds (answers no PING)
  answer S       acknowledges every PING for S seconds

and prints what it saw, one line each:
  pings-answered N       ACKs of its own PINGs
  server-pings N         PINGs the server sent
  goaway CODE DEBUG      a GOAWAY: its error code and debug data
  closed-after-ms MS     the server closed the connection (EOF) that long
                         after the client's last frame
  open                   the connection was still open at the end
"""
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY = 0, 1, 4, 6, 7
ACK, END_HEADERS = 0x1, 0x4


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    # HPACK literal header field without indexing, new name, no Huffman
    name, value = name.encode(), value.encode()
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.pings_answered = 0
        self.server_pings = 0
        self.goaways = []
        self.closed_at = None
        self.last_sent = time.monotonic()
        self.answer = False
        self.send(PREFACE + frame(SETTINGS, 0, 0))

    def send(self, b):
        try:
            self.s.sendall(b)
        except OSError:
            pass
        self.last_sent = time.monotonic()

    def pump(self, seconds):
        """Reads and handles frames for up to seconds (until EOF)."""
        end = time.monotonic() + seconds
        while self.closed_at is None:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.s.settimeout(left)
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                return
            except OSError:
                b = b""
            if not b:
                self.closed_at = time.monotonic()
                return
            self.buf += b
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                ftype, flags = self.buf[3], self.buf[4]
                payload = self.buf[9:9 + n]
                self.buf = self.buf[9 + n:]
                self.handle(ftype, flags, payload)

    def handle(self, ftype, flags, payload):
        if ftype == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        elif ftype == PING and flags & ACK:
            self.pings_answered += 1
        elif ftype == PING:
            self.server_pings += 1
            if self.answer:
                self.send(frame(PING, ACK, 0, payload))
        elif ftype == GOAWAY:
            code = int.from_bytes(payload[4:8], "big")
            self.goaways.append((code, payload[8:].decode("latin-1")))

    def ping(self, i):
        self.send(frame(PING, 0, 0, struct.pack(">Q", i + 1)))

    def report(self):
        print("pings-answered %d" % self.pings_answered)
        print("server-pings %d" % self.server_pings)
        for code, debug in self.goaways:
            print("goaway %d %s" % (code, debug or "-"))
        if self.closed_at is None:
            print("open")
        else:
            print("closed-after-ms %d" % int((self.closed_at - self.last_sent) * 1000))


def main():
    port, mode = int(sys.argv[1]), sys.argv[2]
    c = Conn(port)
    c.pump(0.3)
    if mode == "flood":
        for i in range(int(sys.argv[3])):
            c.ping(i)
        c.pump(3)
    elif mode == "stream":
        ms, n = int(sys.argv[3]), int(sys.argv[4])
        hdrs = b"".join(literal(k, v) for k, v in (
            (":method", "POST"), (":scheme", "http"), (":path", "/etcdserverpb.Watch/Watch"),
            (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
            ("te", "trailers")))
        c.send(frame(HEADERS, END_HEADERS, 1, hdrs))
        c.pump(0.2)
        for i in range(n):
            c.ping(i)
            c.pump(ms / 1000.0)
        c.pump(1)
    elif mode == "silent":
        c.pump(float(sys.argv[3]))
    elif mode == "answer":
        c.answer = True
        c.pump(float(sys.argv[3]))
    else:
        sys.exit("unknown mode " + mode)
    c.report()


main()
