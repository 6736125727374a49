#!/usr/bin/env python3
"""Check the shim's bytes releases (meter = bytes) against the rate, strictly.

  bytes_check.py LOG --rate BYTES_PER_S [--expect-bytes N]

Each "bytes ... go" line carries released=NS and bytes=N: a piece of N bytes that
may go from then on.  Strictly: the bytes of all earlier pieces never exceed rate
x time since the first slot (each piece is paid for before the next goes).
Prints the achieved rate: the bytes before the last piece over the time to it.
"""
import argparse
import re
import sys

GO = re.compile(r" bytes \S+ .*: go .*slot=(\d+) released=(\d+) bytes=(\d+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--expect-bytes", type=int)
    a = ap.parse_args()
    rel = []
    for line in open(a.log):
        m = GO.search(line)
        if m:
            slot, r, n = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if r < slot:
                print("FAIL: released before its slot: " + line.strip())
                return 1
            rel.append((r, n, slot))
    rel.sort()
    if len(rel) < 2:
        print("FAIL: %d byte releases" % len(rel))
        return 1
    t0 = min(x[2] for x in rel)  # the schedule starts at the first slot
    total = 0
    for r, n, _ in rel:
        # What went before this piece must have been paid for by the time elapsed.
        allowed = a.rate * (r - t0) / 1e9 + 1
        if total > allowed:
            print("FAIL: %d bytes released before +%.6f s, more than %.0f" % (total, (r - t0) / 1e9, allowed))
            return 1
        total += n
    span = (rel[-1][0] - t0) / 1e9
    achieved = (total - rel[-1][1]) / span if span > 0 else 0
    print("%d bytes in %d releases over %.3f s: %.0f B/s (configured %.0f, %+.2f%%)"
          % (total, len(rel), span, achieved, a.rate, 100 * (achieved / a.rate - 1)))
    if a.expect_bytes is not None and total < a.expect_bytes:
        print("FAIL: %d bytes released, %d sent" % (total, a.expect_bytes))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
