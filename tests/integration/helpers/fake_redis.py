#!/usr/bin/env python3
"""fake_redis.py PORT SECONDS: a server on 127.0.0.1:PORT that speaks Redis's
protocol badly, for SECONDS.  Each connection gets the next of the ways below to
be wrong, in turn (silence is not among them: a Redis reached that does not
answer makes the leases lapse, which t_fleet_late.sh holds with a stopped Redis); the lease script's load (SCRIPT LOAD) and ROLE are answered as
a Redis master would in the ways that need it, so the daemon's lease call meets
the bad answer.
Prints, at the end, how many connections came and which ways were served.
"""
import socket
import sys
import threading
import time

SHA = b"0123456789abcdef0123456789abcdef01234567"

# Each: (name, answer to a command) - the answer, bytes.
def garbage(cmd):
    return b"\x00\xff!#not redis at all\r\n"

def ok_everything(cmd):
    return b"+OK\r\n"

MASTER_ROLE = b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"

def _lease(bad, role=MASTER_ROLE):
    def answer(cmd):
        if cmd and cmd[0].upper() == b"SCRIPT":
            return b"$40\r\n" + SHA + b"\r\n"
        if cmd and cmd[0].upper() == b"ROLE":
            return role
        if cmd and cmd[0].upper() == b"EVALSHA":
            # KEYS: the epoch, then each item's hash, pause key, expiry set,
            # totals and grid (src/daemon/fleet.lua); the answer: three numbers,
            # then 21 an item.
            items = max(int(cmd[2]) - 1, 0) // 5 if len(cmd) > 2 and cmd[2].isdigit() else 0
            return bad(3 + 21 * items)
        return b"+OK\r\n"
    return answer

def script_refused(cmd):
    if cmd and cmd[0].upper() == b"ROLE":
        return MASTER_ROLE
    if cmd and cmd[0].upper() == b"SCRIPT":
        return b"-ERR the fake runs no scripts\r\n"
    return b"+OK\r\n"

# The start of an answer that never ends: the connection is closed after it (a
# stall mid-answer would be silence, which makes the leases lapse).
CUT = b"abc, and then the connection closes"


def ints(values):
    return b"*%d\r\n" % len(values) + b"".join(b":%d\r\n" % v for v in values)

WAYS = [
    ("garbage bytes", garbage),
    ("+OK to everything", ok_everything),
    ("a script load refused", script_refused),
    ("a replica", _lease(lambda n: ints([1] * n), role=b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n"
                                                      b"$9\r\nconnected\r\n:1\r\n")),
    ("an array of the wrong length", _lease(lambda n: ints([1] * (n + 3)))),
    ("negative numbers", _lease(lambda n: ints([-5] * n))),
    ("a grant far above the limit", _lease(lambda n: ints([int(time.time() * 1000), 0, int(time.time() * 1000000)] +
                                                          ([10 ** 15, 3, 0, 0, 0] + [0] * 16) * ((n - 3) // 21)))),
    ("a run of ranks past the grid", _lease(lambda n: ints([int(time.time() * 1000), 0, int(time.time() * 1000000)] +
                                                           ([1000, 3, 0, 0, 0, 5000 * 8192 + 6000] + [0] * 15) *
                                                           ((n - 3) // 21)))),
    ("a number past 64 bits", _lease(lambda n: b"*%d\r\n" % n + b":99999999999999999999999\r\n" * n)),
    ("nesting 10,000 deep", _lease(lambda n: b"*1\r\n" * 10000)),
    ("a string", _lease(lambda n: b"$5\r\nhello\r\n")),
    ("an error", _lease(lambda n: b"-ERR the fake says no\r\n")),
    ("a bulk string of 2 GB announced", _lease(lambda n: b"$2147483647\r\n" + CUT)),
    ("a pause a thousand years long", _lease(lambda n: ints([int(time.time() * 1000), 0, int(time.time() * 1000000)] +
                                                            ([1, 3, 0, 0, int(time.time() * 1000) + 10 ** 13] + [0] * 16) *
                                                            ((n - 3) // 21)))),
    ("a clock from 1970", _lease(lambda n: ints([5, 0, 5000] + ([1, 3, 0, 0, 0] + [0] * 16) * ((n - 3) // 21)))),
]


def read_command(f):
    """One command as a list of bytes (RESP array of bulk strings, or inline)."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.split()
    n = int(line[1:])
    out = []
    for _ in range(n):
        size = int(f.readline()[1:])
        out.append(f.read(size + 2)[:-2])
    return out


def serve(conn, way):
    name, answer = way
    f = conn.makefile("rb")
    try:
        while True:
            cmd = read_command(f)
            if cmd is None:
                return
            reply = answer(cmd)
            conn.sendall(reply)
            if reply.endswith(CUT):
                return  # an answer cut short: the connection closes mid-answer
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    s.settimeout(0.2)
    served, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn, _ = s.accept()
        except socket.timeout:
            continue
        way = WAYS[len(served) % len(WAYS)]
        served.append(way[0])
        threading.Thread(target=serve, args=(conn, way), daemon=True).start()
    print("%d connections: %s" % (len(served), "; ".join(sorted(set(served)))))


if __name__ == "__main__":
    main()
