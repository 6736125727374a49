#!/usr/bin/env python3
"""Judge the first writes of connections at the destination (the witness's
"first" record: each connection's first payload segment, kernel receive time).

  first_writes.py FILE --interval-ms I --expect N [--window K] [--slack S]

Every connection's request there (N of them), and in any K consecutive
intervals no more than K + S first writes: an event loop's bunch after a stall
(thirty requests in a millisecond as it starts) fails; the first writes' line
(docs/design.md, "First writes on time") keeps them an interval apart, up to
the kicker's lateness.  Prints the largest count seen, the smallest gap and the
rate the first writes came at over their own span.
"""
import argparse
import sys

import syn_witness


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--interval-ms", type=float, required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--slack", type=int, default=3)
    ap.add_argument("--what", default="first writes")
    a = ap.parse_args()
    if syn_witness.missed(a.file):
        print("FAIL: the witness missed packets of %s: no verdict on a record with holes" % a.file)
        return 1
    t = sorted(int(line.split()[0]) for line in open(a.file) if line.strip())
    if len(t) != a.expect:
        print("FAIL: %s: %d at the destination, %d expected" % (a.what, len(t), a.expect))
        return 1
    span = int(a.window * a.interval_ms * 1e6)
    most, i = 0, 0
    for j in range(len(t)):
        while t[i] <= t[j] - span:
            i += 1
        most = max(most, j - i + 1)
    gaps = [(b - x) / 1e6 for x, b in zip(t, t[1:])]
    rate = (len(t) - 1) / ((t[-1] - t[0]) / 1e9)
    print("%s: %d, at most %d in any %d intervals (bound %d), smallest gap %.3f ms, %.1f/s over their span"
          % (a.what, len(t), most, a.window, a.window + a.slack, min(gaps), rate))
    if most > a.window + a.slack:
        print("FAIL: %s: %d within %d intervals" % (a.what, most, a.window))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
