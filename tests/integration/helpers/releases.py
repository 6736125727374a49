#!/usr/bin/env python3
"""Check the release times the shim logged (SLUICE_DEBUG lines in SLUICE_LOG).

Every "go" line carries slot=NS (the time the queue gave the request) and
released=NS (when the shim let it go).  Asserts, strictly:
  - no release before its slot;
  - no two consecutive releases closer than --interval-ms minus --slack-ms
    (only meaningful with burst = 1);
  - with --expect N: exactly N releases, spanning at least (N-1) intervals
    minus the slack.
Prints a one-line summary; exits 1 on any violation.
"""
import argparse
import re
import sys

GO = re.compile(r"sluice\[(\d+)\]: ((?:deferred )?\w+) (\S+).* sections=(\S+): go .*slot=(\d+) released=(\d+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--interval-ms", type=float, required=True)
    ap.add_argument("--slack-ms", type=float, default=1.0)
    ap.add_argument("--expect", type=int)
    ap.add_argument("--dest", help="only releases to this address:port")
    args = ap.parse_args()

    rel = []
    with open(args.log) as f:
        for line in f:
            m = GO.search(line)
            if not m or (args.dest and m.group(3) != args.dest):
                continue
            slot, released = int(m.group(5)), int(m.group(6))
            if released < slot:
                print("FAIL: released %d ns before its slot: %s" % (slot - released, line.strip()))
                return 1
            rel.append(released)
    rel.sort()
    if args.expect is not None and len(rel) != args.expect:
        print("FAIL: %d releases logged, expected %d" % (len(rel), args.expect))
        return 1
    if len(rel) < 2:
        print("FAIL: too few releases (%d) to check" % len(rel))
        return 1
    gaps = [(b - a) / 1e6 for a, b in zip(rel, rel[1:])]
    span = (rel[-1] - rel[0]) / 1e6
    floor = args.interval_ms - args.slack_ms
    print("releases=%d span=%.1fms min_gap=%.3fms mean_gap=%.3fms (interval %.1fms)"
          % (len(rel), span, min(gaps), span / len(gaps), args.interval_ms))
    if min(gaps) < floor:
        print("FAIL: two releases %.3f ms apart, below %.3f ms" % (min(gaps), floor))
        return 1
    if span < (len(rel) - 1) * args.interval_ms - args.slack_ms:
        print("FAIL: %d releases in %.1f ms, faster than the rate" % (len(rel), span))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
