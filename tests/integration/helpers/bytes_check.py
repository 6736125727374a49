#!/usr/bin/env python3
"""Check bytes at the destination (meter = bytes) against the rate, strictly.

  bytes_check.py FILE --rate BYTES_PER_S --piece N [--expect-bytes N] [--slack-ms S]
                 [--span S] [--floor PCT [--big N]]

FILE is the witness's record of every payload segment (kernel receive time and
length, helpers/syn_witness.py --what bytes).  Strictly: the bytes that arrived
before any segment never exceed rate x the time since the first arrived, plus one
piece (the shim releases N bytes at a time, which then travel at full speed) and
--slack-ms of measuring jitter.  With --span S, also every span of S seconds,
wherever it starts: at most rate x S + one piece - what a sender that fell behind
(a receiver that stopped reading) may not make up in a burst.  Prints the rate
achieved at the destination.

With --floor PCT, also the other half of the promise: from the first segment of
at least --big bytes to the last (the upload itself, not a protocol's handshake
before it or its farewell after), the bytes between arrive at no less than PCT %
of the rate.
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
    if a.span:
        # Any span of --span seconds: at most rate x span + one piece (+ slack).
        # Two pointers over the arrivals: [i, j] is the segments within one span.
        w, i, inside, busiest = int(a.span * 1e9), 0, 0, 0
        bound = a.rate * (a.span + a.slack_ms / 1e3) + a.piece
        for j, (t, n) in enumerate(segs):
            inside += n
            while segs[i][0] < t - w:
                inside -= segs[i][1]
                i += 1
            busiest = max(busiest, inside)
            if inside > bound:
                print("FAIL: %d bytes arrived within %.1f s (+%.6f s to +%.6f s), more than %.0f"
                      % (inside, a.span, (segs[i][0] - t0) / 1e9, (t - t0) / 1e9, bound))
                return 1
    span = (segs[-1][0] - t0) / 1e9
    achieved = total / span if span > 0 else 0
    print("%d bytes in %d segments over %.3f s at the destination: %.0f B/s (configured %.0f, %+.2f%%)%s"
          % (total, len(segs), span, achieved, a.rate, 100 * (achieved / a.rate - 1),
             "; busiest %.1f s: %d bytes (rate + piece: %.0f)" % (a.span, busiest, a.rate * a.span + a.piece)
             if a.span else ""))
    if a.expect_bytes is not None and total < a.expect_bytes:
        print("FAIL: %d bytes arrived, %d sent" % (total, a.expect_bytes))
        return 1
    if a.floor is not None:
        big = [t for t, n in segs if n >= a.big]
        if len(big) < 2:
            print("FAIL: %d segments of %d bytes or more" % (len(big), a.big))
            return 1
        inside = sum(n for t, n in segs if big[0] <= t < big[-1])
        pct = 100 * inside / ((big[-1] - big[0]) / 1e9) / a.rate
        print("upload from its first to its last large segment: %d bytes in %.3f s, %.2f%% of the rate"
              % (inside, (big[-1] - big[0]) / 1e9, pct))
        if pct < a.floor:
            print("FAIL: %.2f%% of the rate, under the floor of %.1f%%" % (pct, a.floor))
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--expect-bytes", type=int)
    ap.add_argument("--piece", type=int, default=0)
    ap.add_argument("--slack-ms", type=float, default=1.0)
    ap.add_argument("--span", type=float, help="also: any span of this many seconds holds at most "
                    "rate x span + one piece")
    ap.add_argument("--floor", type=float, help="the upload's rate, at least this %% of --rate")
    ap.add_argument("--big", type=int, default=4096, help="--floor: the segments that make the upload")
    a = ap.parse_args()
    lost = syn_witness.missed(a.file)
    if lost:
        print("FAIL: the witness missed %d packets of %s: no verdict on a record with holes" % (lost, a.file))
        return 1
    return check_arrivals(a)


if __name__ == "__main__":
    sys.exit(main())
