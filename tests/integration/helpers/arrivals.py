#!/usr/bin/env python3
"""Check arrival times recorded at the destination against a rate's promise.

The input has one arrival a line, its first field a time in nanoseconds (the SYN
witness's kernel timestamps, or a server log); other fields are ignored, and so
are lines before --skip arrivals.  The promise for a leaky or token bucket of
--interval-ms and --burst is: at most burst + W/interval arrivals in any span W,
and with --tolerance-ms L (the section's tolerance) burst + (W + L)/interval.
That is exactly conformance to GCRA(interval, (burst-1)*interval), checked here in
one pass, with --slack-ms of measuring jitter allowed on top (the kernel stamps the
SYN a little after the release it follows).  Also checks --expect N arrivals.
With --group-field N the arrivals are split by their Nth field (a key: a Host
header, a destination address, cut to --group-prefix bits when it is IPv4) and each
group is held to the promise on its own, as a keyed section's queues are.
Prints a one-line summary; exits 1 on any violation.
"""
import ipaddress
import argparse
import sys

import syn_witness


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--interval-ms", type=float, required=True)
    ap.add_argument("--burst", type=int, default=1)
    ap.add_argument("--slack-ms", type=float, default=1.0)
    ap.add_argument("--tolerance-ms", type=float, default=0.0, help="the section's tolerance")
    ap.add_argument("--expect", type=int)
    ap.add_argument("--at-least", type=int)
    ap.add_argument("--what", default="arrivals")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N arrivals")
    ap.add_argument("--family", choices=["4", "6"], help="only arrivals over IPv4 (or IPv6): "
                    "the witness's second field")
    ap.add_argument("--group-field", type=int, help="check each value of this field (1-based) "
                    "on its own")
    ap.add_argument("--group-prefix", type=int, default=32, help="with --group-field: IPv4 "
                    "addresses are grouped by this many leading bits")
    ap.add_argument("--groups", type=int, help="with --group-field: expect this many groups")
    ap.add_argument("--min-rate", type=float, help="all arrivals together came at least this "
                    "fast (per second); with --group-field: no single queue held them all")
    args = ap.parse_args()
    lost = syn_witness.missed(args.file)
    if lost:
        print("FAIL: the witness missed %d packets of %s: no verdict on a record with holes" % (lost, args.file))
        return 1

    times, groups = [], {}
    with open(args.file) as f:
        for line in f:
            parts = line.split()
            if args.family and (len(parts) < 2 or parts[1] != args.family):
                continue
            if parts and parts[0].isdigit():
                times.append(int(parts[0]))
                if args.group_field:
                    key = parts[args.group_field - 1] if len(parts) >= args.group_field else "-"
                    try:
                        net = ipaddress.ip_network("%s/%d" % (key, args.group_prefix), strict=False)
                        key = str(net) if net.version == 4 else key
                    except ValueError:
                        pass
                    groups.setdefault(key, []).append(int(parts[0]))
    if args.group_field:
        return check_groups(args, times, groups)
    return check(args, times)


def check_groups(args, times, groups):
    times.sort()
    if args.expect is not None and len(times) != args.expect:
        print("FAIL: %d %s at the destination, expected %d" % (len(times), args.what, args.expect))
        return 1
    if args.groups is not None and len(groups) != args.groups:
        print("FAIL: %d keys among the %s, expected %d" % (len(groups), args.what, args.groups))
        return 1
    T = args.interval_ms * 1e6
    tau = (args.burst - 1) * T + (args.tolerance_ms + args.slack_ms) * 1e6
    worst = None
    for key, ts in groups.items():
        ts.sort()
        tat = ts[0]
        for i, t in enumerate(ts):
            if t < tat - tau:
                print("FAIL: key %s: %s %d (at %d ns) came %.3f ms early for one every %.1fms"
                      % (key, args.what, i, t, (tat - tau - t) / 1e6, args.interval_ms))
                return 1
            tat = max(t, tat) + T
        for a, b in zip(ts, ts[1:]):
            worst = (b - a) / 1e6 if worst is None else min(worst, (b - a) / 1e6)
    span = (times[-1] - times[0]) / 1e9 if len(times) > 1 else 0
    rate = (len(times) - 1) / span if span > 0 else float("inf")
    if args.min_rate is not None and rate < args.min_rate:
        print("FAIL: %d %s over %.2fs (%.1f/s): slower than %.1f/s, as if keys shared a queue"
              % (len(times), args.what, span, rate, args.min_rate))
        return 1
    print("%s=%d keys=%d span=%.2fs rate=%.1f/s min_gap_within_a_key=%s (interval %.1fms)"
          % (args.what, len(times), len(groups), span, rate,
             "%.3fms" % worst if worst is not None else "-", args.interval_ms))
    return 0


def check(args, times):
    times.sort()
    times = times[args.skip:]
    n = len(times)
    if args.expect is not None and n != args.expect:
        print("FAIL: %d %s at the destination, expected %d" % (n, args.what, args.expect))
        return 1
    if args.at_least is not None and n < args.at_least:
        print("FAIL: %d %s at the destination, expected at least %d" % (n, args.what, args.at_least))
        return 1
    if n < 2:
        print("FAIL: too few %s (%d) to check" % (args.what, n))
        return 1
    T = args.interval_ms * 1e6
    tau = (args.burst - 1) * T + (args.tolerance_ms + args.slack_ms) * 1e6
    tat = times[0]
    for i, t in enumerate(times):
        if t < tat - tau:
            print("FAIL: %s %d (at %d ns) came %.3f ms early: more than burst %d + W/%.1fms in a span"
                  % (args.what, i, t, (tat - tau - t) / 1e6, args.burst, args.interval_ms))
            return 1
        tat = max(t, tat) + T
    gaps = [(b - a) / 1e6 for a, b in zip(times, times[1:])]
    span = (times[-1] - times[0]) / 1e6
    if args.min_rate is not None and span > 0 and len(gaps) / (span / 1e3) < args.min_rate:
        print("FAIL: %d %s over %.1fms (%.1f/s): slower than %.1f/s"
              % (n, args.what, span, len(gaps) / (span / 1e3), args.min_rate))
        return 1
    print("%s=%d span=%.1fms min_gap=%.3fms mean_gap=%.3fms (interval %.1fms, burst %d)"
          % (args.what, n, span, min(gaps), span / len(gaps), args.interval_ms, args.burst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
