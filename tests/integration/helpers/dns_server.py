#!/usr/bin/env python3
"""A small DNS responder on loopback, over UDP and TCP, for tests.

  dns_server.py --port-file FILE [--port N] [--log FILE] [--name NAME=ADDR ...]
                [--only-named] [--truncate-udp] [--delay S] [--lifetime S]

Answers A queries: a --name it was given with that address, any other name with
127.0.0.1 unless --only-named (then NXDOMAIN).  AAAA and other types get an empty
NOERROR answer.  Each query is logged as "NS udp|tcp NAME TYPE" (monotonic
nanoseconds).  --truncate-udp answers every UDP query with the TC bit and no
records, so the client asks again over TCP.  --delay sends each UDP answer S
seconds after its query (a slow name server; queries meanwhile are answered
too).  Exits by itself after --lifetime seconds.
"""
import argparse
import os
import socket
import struct
import threading
import time


def parse_question(msg):
    """(id, flags, name, qtype, end of question) of a query."""
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd < 1:
        raise ValueError("no question")
    i, labels = 12, []
    while True:
        n = msg[i]
        i += 1
        if n == 0:
            break
        if n & 0xC0:
            raise ValueError("compressed question")
        labels.append(msg[i:i + n].decode("ascii", "replace"))
        i += n
    qtype, _qclass = struct.unpack("!HH", msg[i:i + 4])
    return qid, flags, ".".join(labels).lower(), qtype, i + 4


def answer(msg, names, only_named, truncate=False):
    qid, flags, name, qtype, end = parse_question(msg)
    if truncate:
        head = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | 0x0200 | (flags & 0x0100), 1, 0, 0, 0)
        return head + msg[12:end], name, qtype
    question = msg[12:end]
    rd = flags & 0x0100
    addr = names.get(name.rstrip("."))
    rcode, records = 0, b""
    if addr is None and only_named:
        rcode = 3
    elif qtype == 1:
        rdata = socket.inet_aton(addr or "127.0.0.1")
        # A pointer to the question's name (offset 12), type A, class IN, TTL 5.
        records = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, len(rdata)) + rdata
    head = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | rd | 0x0080 | rcode, 1,
                       1 if records else 0, 0, 0)
    return head + question + records, name, qtype


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--only-named", action="store_true")
    ap.add_argument("--truncate-udp", action="store_true")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--lifetime", type=float, default=240)
    a = ap.parse_args()
    names = dict(n.lower().split("=", 1) for n in a.name)
    log = open(a.log, "a", buffering=1) if a.log else None
    lock = threading.Lock()

    def note(kind, name, qtype):
        if log:
            with lock:
                log.write("%d %s %s %d\n" % (time.monotonic_ns(), kind, name, qtype))

    # One port number for both: the kernel picks a free UDP port, whose TCP twin
    # may be some connection's ephemeral port (make asan once met that); a port
    # picked so is tried again, a given one fails at once.  Bounded: 50 tries.
    for attempt in range(50):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", a.port))
        port = udp.getsockname()[1]
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind(("127.0.0.1", port))
            break
        except OSError:
            tcp.close()
            udp.close()
            if a.port or attempt == 49:
                raise
    tcp.listen(16)

    def serve_udp():
        while True:
            msg, peer = udp.recvfrom(4096)
            try:
                out, name, qtype = answer(msg, names, a.only_named, a.truncate_udp)
            except (ValueError, IndexError, struct.error):
                continue
            note("udp", name, qtype)
            if a.delay > 0:
                threading.Timer(a.delay, udp.sendto, args=(out, peer)).start()
            else:
                udp.sendto(out, peer)

    def serve_tcp_conn(c):
        with c:
            f = c.makefile("rb")
            while True:
                head = f.read(2)
                if len(head) < 2:
                    return
                msg = f.read(struct.unpack("!H", head)[0])
                try:
                    out, name, qtype = answer(msg, names, a.only_named)
                except (ValueError, IndexError, struct.error):
                    return
                note("tcp", name, qtype)
                c.sendall(struct.pack("!H", len(out)) + out)

    def serve_tcp():
        while True:
            c, _ = tcp.accept()
            threading.Thread(target=serve_tcp_conn, args=(c,), daemon=True).start()

    threading.Thread(target=serve_udp, daemon=True).start()
    threading.Thread(target=serve_tcp, daemon=True).start()
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(a.port_file + ".tmp", a.port_file)
    time.sleep(a.lifetime)


if __name__ == "__main__":
    main()
