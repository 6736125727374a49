#!/usr/bin/env python3
"""Check bytes at the destination (meter = bytes) against the rate, strictly.

  bytes_check.py FILE --rate BYTES_PER_S --piece N [--expect-bytes N] [--slack-ms S]

FILE is the witness's record of every payload segment (kernel receive time and
length, helpers/syn_witness.py --what bytes).  Strictly: the bytes that arrived
before any segment never exceed rate x the time since the first arrived, plus one
piece (the shim releases N bytes at a time, which then travel at full speed) and
--slack-ms of measuring jitter.  Prints the rate achieved at the destination.
"""
import argparse
import sys

import syn_witness

def check_arrivals(a):
    segs = sorted((int(f[0]), int(f[3])) for f in (line.split() for line in open(a.file)) if len(f) >= 4)
    if len(segs) < 2:
        print("FAIL: %d segments at the destination" % len(segs))
        return 1
    t0, total = segs[0][0], 0
    for t, n in segs:
        allowed = a.rate * ((t - t0) / 1e9 + a.slack_ms / 1e3) + a.piece
        if total > allowed:
            print("FAIL: %d bytes had arrived by +%.6f s, more than %.0f" % (total, (t - t0) / 1e9, allowed))
            return 1
        total += n
    span = (segs[-1][0] - t0) / 1e9
    achieved = total / span if span > 0 else 0
    print("%d bytes in %d segments over %.3f s at the destination: %.0f B/s (configured %.0f, %+.2f%%)"
          % (total, len(segs), span, achieved, a.rate, 100 * (achieved / a.rate - 1)))
    if a.expect_bytes is not None and total < a.expect_bytes:
        print("FAIL: %d bytes arrived, %d sent" % (total, a.expect_bytes))
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--expect-bytes", type=int)
    ap.add_argument("--piece", type=int, default=0)
    ap.add_argument("--slack-ms", type=float, default=1.0)
    a = ap.parse_args()
    lost = syn_witness.missed(a.file)
    if lost:
        print("FAIL: the witness missed %d packets of %s: no verdict on a record with holes" % (lost, a.file))
        return 1
    return check_arrivals(a)


if __name__ == "__main__":
    sys.exit(main())
