#!/usr/bin/env python3
"""overlap.py LIMIT [--count N | --at-least N] [--what TEXT]: intervals on stdin,
one "START END" per line (any clock, the same for all), as concurrency tests record
each connection's life.  Prints how many there were and the most open at once;
exits 1 when more than LIMIT were open at once, or the count is not as asked (an
empty record proves nothing).  Ends at an instant count before starts there: a
place given back and taken again in the same nanosecond is not an overlap."""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("limit", type=int)
    ap.add_argument("--count", type=int, help="exactly this many intervals")
    ap.add_argument("--at-least", type=int, default=1, help="at least this many intervals")
    ap.add_argument("--what", default="connections")
    a = ap.parse_args()
    iv = []
    for line in sys.stdin:
        f = line.split()
        if len(f) >= 2 and f[0].lstrip("-").isdigit() and f[1].lstrip("-").isdigit():
            iv.append((int(f[0]), int(f[1])))
    events = sorted([(s, 1) for s, _ in iv] + [(e, -1) for _, e in iv])
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    print("  %d %s, at most %d open at once (limit %d)" % (len(iv), a.what, peak, a.limit))
    if a.count is not None and len(iv) != a.count:
        print("  expected %d of them" % a.count)
        return 1
    if len(iv) < a.at_least:
        print("  expected at least %d of them" % a.at_least)
        return 1
    return 0 if peak <= a.limit else 1


sys.exit(main())
