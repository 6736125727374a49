#!/usr/bin/env python3
"""hold_clients.py ADDR PORT SECONDS HOLD_S [--procs N]: N processes each open a
connection to ADDR:PORT, keep it HOLD_S seconds, close it, and again, for SECONDS.
Prints one line per connection, "START END" in CLOCK_MONOTONIC ns: START when
connect() returned (connected), END when close() is called - the connection as
the client holds it, as t_concurrency.sh checks it (a place is taken before the
SYN and given back after the close, so these overlap no more than places allow).
Every loop ends by its deadline.
"""
import argparse
import multiprocessing
import socket
import time


def worker(addr, port, end, hold, out):
    lines = []
    while time.monotonic() < end:
        try:
            s = socket.create_connection((addr, port), timeout=max(1.0, end - time.monotonic() + 5))
        except OSError:
            continue
        start = time.monotonic_ns()
        time.sleep(hold)
        lines.append("%d %d" % (start, time.monotonic_ns()))
        s.close()
    out.put(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("seconds", type=float)
    ap.add_argument("hold", type=float)
    ap.add_argument("--procs", type=int, default=4)
    a = ap.parse_args()
    end = time.monotonic() + a.seconds
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(a.addr, a.port, end, a.hold, out))
             for _ in range(a.procs)]
    for p in procs:
        p.start()
    for _ in procs:
        for line in out.get(timeout=a.seconds + 60):
            print(line)
    for p in procs:
        p.join(timeout=10)


if __name__ == "__main__":
    main()
