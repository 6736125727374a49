#!/usr/bin/env python3
"""answers_check.py WITNESS SERVER_LOG CHECK...: hold the destination's record
(the kernel witness's arrivals - requests, or SYNs for HTTPS - REALTIME_NS first) to what an answer asked.
The instant of an answer is when the server began writing it (SERVER_LOG "NS answered
PATH", the latest such line): the shim cannot have read it earlier, so nothing it let go after that
instant may arrive inside the pause - but a request let go before the client read
the answer may, for --inflight-ms (10 ms: one release at 100/s; more for a client
slow to read its answer).  Checks:
  --pause PATH=S       no arrival in [answer + 10 ms, answer + S); prints how late
                       the first after it came, fails past --late (0.25 s); at most
                       --spread (5: a few) arrivals in the first 100 ms after it
  --budget PATH=N/S    at most N arrivals in [answer + 10 ms, answer + S)
  --goes-on PATH       at least 30 arrivals in the second after the answer
  --dst ADDR           only arrivals to ADDR (a witness run with --key dst)
"""
import argparse
import os
import sys

INFLIGHT = 10_000_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("witness")
    ap.add_argument("server_log")
    ap.add_argument("--pause", action="append", default=[])
    ap.add_argument("--budget", action="append", default=[])
    ap.add_argument("--goes-on", action="append", default=[])
    ap.add_argument("--dst")
    ap.add_argument("--late", type=float, default=0.25)
    ap.add_argument("--spread", type=int, default=5)
    ap.add_argument("--inflight-ms", type=float, default=10)
    a = ap.parse_args()
    global INFLIGHT
    INFLIGHT = int(a.inflight_ms * 1e6)
    if os.path.exists(a.witness + ".drops"):
        print("FAIL: the witness dropped packets: no verdict")
        return 1
    times = []
    for line in open(a.witness):
        f = line.split()
        if len(f) < 3 or not f[0].isdigit():
            continue
        if a.dst and (len(f) < 4 or f[3] != a.dst):
            continue
        times.append(int(f[0]))
    times.sort()
    answered = {}
    for line in open(a.server_log):
        f = line.split()
        if len(f) == 3 and f[1] == "answered":
            answered[f[2]] = int(f[0])  # the latest: the run just made
    bad = 0

    def at(path):
        if path not in answered:
            print("FAIL: the server never answered %s" % path)
            sys.exit(1)
        return answered[path]

    def within(lo, hi):
        return [t for t in times if lo <= t < hi]

    for spec in a.pause:
        path, s = spec.rsplit("=", 1)
        t0, span = at(path), int(float(s) * 1e9)
        inside = within(t0 + INFLIGHT, t0 + span)
        after = [t for t in times if t >= t0 + span]
        first = after[0] if after else None
        print("%s: answered; %d arrivals in the %.1f s after it%s" % (
            path, len(inside), span / 1e9,
            "" if not inside else " (first %.3f s in)" % ((inside[0] - t0) / 1e9)))
        if inside:
            bad += 1
            print("FAIL: %s asked %.1f s of nothing" % (path, span / 1e9))
        if first is None:
            bad += 1
            print("FAIL: nothing came after the pause")
            continue
        late = (first - t0 - span) / 1e9
        burst = len(within(first, first + 100_000_000))
        print("  first after the pause %.3f s late; %d in its first 100 ms" % (late, burst))
        if late > a.late:
            bad += 1
            print("FAIL: resumed %.3f s late (more than %.2f)" % (late, a.late))
        if burst > a.spread:
            bad += 1
            print("FAIL: %d released in the first 100 ms after the pause (a herd)" % burst)
    for spec in a.budget:
        path, s = spec.rsplit("=", 1)
        n, secs = s.split("/")
        t0, span = at(path), int(float(secs) * 1e9)
        inside = within(t0 + INFLIGHT, t0 + span)
        print("%s: %d arrivals in the %.1f s after it (budget %s)" % (path, len(inside), span / 1e9, n))
        if len(inside) > int(n):
            bad += 1
            print("FAIL: more than the budget")
        if len(within(t0 + span, t0 + span + 1_000_000_000)) < 30:
            bad += 1
            print("FAIL: the queue did not go on after the budget's time")
    for path in a.goes_on:
        t0 = at(path)
        n = len(within(t0, t0 + 1_000_000_000))
        print("%s: %d arrivals in the second after it" % (path, n))
        if n < 30:
            bad += 1
            print("FAIL: the queue paused on an answer it should have ignored")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
