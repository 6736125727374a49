#!/usr/bin/env python3
"""Concurrency hand-over: with a limit of one connection to 127.0.0.1:PORT, hold
one, start a second in a thread, close the first after HOLD seconds and measure how
long the second takes to get through.

  handover.py PORT ROUNDS HOLD [--max-ms MS]

Checks that the second waited while the first was open; prints the latencies
(p50/p99/max, microseconds); with --max-ms exits 1 if any exceeded it.
"""
import argparse
import socket
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("rounds", type=int)
    ap.add_argument("hold", type=float)
    ap.add_argument("--max-ms", type=float)
    a = ap.parse_args()
    lat = []
    for _ in range(a.rounds):
        first = socket.create_connection(("127.0.0.1", a.port))
        got = {}

        def waiter():
            b = socket.create_connection(("127.0.0.1", a.port))
            got["t"] = time.monotonic_ns()
            b.close()

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(a.hold)
        if "t" in got:
            sys.exit("the second connection did not wait for the first")
        closed = time.monotonic_ns()
        first.close()
        t.join(10)
        lat.append((got["t"] - closed) / 1e3)
    lat.sort()
    print("hand-over after close: p50 %.0f us, p99 %.0f us, max %.0f us (%d hand-overs)"
          % (lat[len(lat) // 2], lat[int(len(lat) * 0.99)], lat[-1], len(lat)))
    if a.max_ms is not None and lat[-1] > a.max_ms * 1000:
        sys.exit("a hand-over took %.0f ms: polled, not woken?" % (lat[-1] / 1000))


if __name__ == "__main__":
    main()
