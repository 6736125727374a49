#!/usr/bin/env python3
"""Check the shim's logged releases against a window strategy, strictly.

  windows.py LOG --strategy fixed|sliding|session --amount A --window-ms W
             [--expect N] [--section NAME]

fixed: no UTC-aligned window of W holds more than A releases (releases are
CLOCK_MONOTONIC; UTC is that plus time.time_ns() - time.monotonic_ns(), read here).
sliding: no span of W holds more than A.  session: counting as a receiver that
opens a session at a request and keeps it W long, no session holds more than A.
Also: no release before its slot.  Prints the per-window counts; exits 1 on any
violation.
"""
import argparse
import re
import sys
import time

GO = re.compile(r" sections=(\S+): go .*slot=(\d+) released=(\d+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--strategy", required=True, choices=["fixed", "sliding", "session"])
    ap.add_argument("--amount", type=int, required=True)
    ap.add_argument("--window-ms", type=float, required=True)
    ap.add_argument("--expect", type=int)
    ap.add_argument("--section")
    a = ap.parse_args()
    w = int(a.window_ms * 1e6)
    off = time.time_ns() - time.monotonic_ns()
    rel = []
    for line in open(a.log):
        m = GO.search(line)
        if not m or (a.section and a.section not in m.group(1).split(",")):
            continue
        slot, r = int(m.group(2)), int(m.group(3))
        if r < slot:
            print("FAIL: released before its slot: " + line.strip())
            return 1
        rel.append(r)
    rel.sort()
    if a.expect is not None and len(rel) != a.expect:
        print("FAIL: %d releases, expected %d" % (len(rel), a.expect))
        return 1
    groups = []
    if a.strategy == "fixed":
        for r in rel:
            k = (r + off) // w
            if groups and groups[-1][0] == k:
                groups[-1][1].append(r)
            else:
                groups.append((k, [r]))
    elif a.strategy == "session":
        i = 0
        while i < len(rel):
            j = i
            while j < len(rel) and rel[j] < rel[i] + w:
                j += 1
            groups.append((rel[i], rel[i:j]))
            i = j
    else:
        i = 0
        for j in range(len(rel)):
            while rel[i] <= rel[j] - w:
                i += 1
            if j - i + 1 > a.amount:
                print("FAIL: %d releases within %.0f ms" % (j - i + 1, a.window_ms))
                return 1
        groups = [(0, rel)]
    counts = [len(g[1]) for g in groups]
    print("releases=%d %s windows: %s" % (len(rel), a.strategy,
          counts if a.strategy != "sliding" else "max %d in any %.0f ms" % (
              max(sum(1 for x in rel if r - w < x <= r) for r in rel) if rel else 0, a.window_ms)))
    if a.strategy != "sliding" and max(counts or [0]) > a.amount:
        print("FAIL: a window holds %d releases (amount %d)" % (max(counts), a.amount))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
