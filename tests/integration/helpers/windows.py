#!/usr/bin/env python3
"""Check arrivals at the destination against a window strategy, strictly.

  windows.py FILE --strategy fixed|sliding|session --amount A --window-ms W
             [--expect N] [--slack-ms S]

FILE is the witness's (helpers/syn_witness.py): kernel receive times, in
CLOCK_REALTIME nanoseconds, one a line.  fixed: no UTC-aligned window of W holds
more than A arrivals.  sliding: no span of W holds more than A.  session: counting
as a receiver that opens a session at an arrival and keeps it W long, no session
holds more than A.  --slack-ms (default 1) is the measuring jitter allowed: an
arrival that close before a fixed window's boundary counts in the window after
it, and spans are that much shorter.  Prints the per-window counts; exits 1 on any
violation.
"""
import argparse
import sys

import syn_witness


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--strategy", required=True, choices=["fixed", "sliding", "session"])
    ap.add_argument("--amount", type=int, required=True)
    ap.add_argument("--window-ms", type=float, required=True)
    ap.add_argument("--expect", type=int)
    ap.add_argument("--slack-ms", type=float, default=1.0)
    a = ap.parse_args()
    lost = syn_witness.missed(a.file)
    if lost:
        print("FAIL: the witness missed %d packets of %s: no verdict on a record with holes" % (lost, a.file))
        return 1
    w = int(a.window_ms * 1e6)
    slack = int(a.slack_ms * 1e6)
    rel = sorted(int(line.split()[0]) for line in open(a.file) if line.strip())
    if a.expect is not None and len(rel) != a.expect:
        print("FAIL: %d arrivals, expected %d" % (len(rel), a.expect))
        return 1
    groups = []
    if a.strategy == "fixed":
        for r in rel:
            k = (r + slack) // w
            if groups and groups[-1][0] == k:
                groups[-1][1].append(r)
            else:
                groups.append((k, [r]))
    elif a.strategy == "session":
        i = 0
        while i < len(rel):
            j = i
            while j < len(rel) and rel[j] < rel[i] + w - slack:
                j += 1
            groups.append((rel[i], rel[i:j]))
            i = j
    else:
        i = 0
        for j in range(len(rel)):
            while rel[i] <= rel[j] - w + slack:
                i += 1
            if j - i + 1 > a.amount:
                print("FAIL: %d arrivals within %.0f ms" % (j - i + 1, a.window_ms))
                return 1
        groups = [(0, rel)]
    counts = [len(g[1]) for g in groups]
    print("arrivals=%d %s windows: %s" % (len(rel), a.strategy,
          counts if a.strategy != "sliding" else "max %d in any %.0f ms" % (
              max(sum(1 for x in rel if r - w < x <= r) for r in rel) if rel else 0, a.window_ms)))
    if a.strategy != "sliding" and max(counts or [0]) > a.amount:
        print("FAIL: a window holds %d arrivals (amount %d)" % (max(counts), a.amount))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
