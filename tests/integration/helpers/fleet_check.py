#!/usr/bin/env python3
"""fleet_check.py SYNLOG [options]: hold a fleet's arrivals, as the destination's
witness recorded them (syn_witness.py --key dst: one line per SYN, "REALTIME_NS
FAMILY SRCPORT DST", each machine's clients sending to their own address), to what
the fleet promises.

  --from NS --to NS      only arrivals in [from, to) (CLOCK_REALTIME ns)
  --exclude DST          not the arrivals at DST (another section's)
  --only DST             only the arrivals at DST
  --max-per-second N     never more than N in any span of one second (strict)
  --rate R --within PCT  all together came at R/s, within PCT percent (below or above)
  --share DST=R/PCT      that machine's arrivals came at R/s within PCT percent
  --at-least N           at least N arrivals (1 unless told; 0 for a span that
                         must see none, with --max-per-second 0)
  --arrivals-span        measure the rate from the first arrival to the last, as
                         (N - 1) over that span: a section whose client starts and
                         stops inside [from, to) (a process's start-up is not the
                         shaper's to deliver)
  --reached DST=R/S      that machine's arrivals, counted over half a second, came
                         to 90% of R/s within S seconds of --from (prints when)

Prints the figures; exits 1 on the first promise not kept, or when the witness
missed packets (syn_witness.missed): no verdict on a record with holes.
"""
import argparse
import sys

import syn_witness


def most_in(times, span):
    most, j = 0, 0
    for i in range(len(times)):
        while times[i] - times[j] >= span:
            j += 1
        most = max(most, i - j + 1)
    return most


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--from", dest="start", type=int, default=0)
    ap.add_argument("--to", dest="end", type=int, default=1 << 63)
    ap.add_argument("--max-per-second", type=int)
    ap.add_argument("--rate", type=float)
    ap.add_argument("--within", type=float, default=2.0)
    ap.add_argument("--share", action="append", default=[])
    ap.add_argument("--at-least", type=int, default=1)
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--reached", action="append", default=[])
    ap.add_argument("--arrivals-span", action="store_true")
    ap.add_argument("--what", default="arrivals")
    a = ap.parse_args()
    lost = syn_witness.missed(a.file)
    if lost:
        print("FAIL: the witness missed %d packets of %s: no verdict" % (lost, a.file))
        return 1
    rows = [line.split() for line in open(a.file) if line.strip()]
    rows = [r for r in rows if a.start <= int(r[0]) < a.end and (len(r) < 4 or r[3] not in a.exclude)
            and (not a.only or (len(r) > 3 and r[3] in a.only))]
    times = sorted(int(r[0]) for r in rows)
    if len(times) < a.at_least:
        print("FAIL: %d %s, expected at least %d" % (len(times), a.what, a.at_least))
        return 1
    if not times:
        # --at-least 0: none is what was asked; a rate or a share of none fails.
        print("%s: none" % a.what)
        return 1 if a.rate is not None or a.share or a.reached else 0
    span_s = ((min(a.end, times[-1] + 1) if a.end < 1 << 63 else times[-1]) -
              (a.start if a.start else times[0])) / 1e9
    rate = len(times) / span_s if span_s > 0 else 0.0
    if a.arrivals_span:
        # N arrivals bound N - 1 intervals: the rate the shaper kept while its
        # client was there to be shaped.
        span_s = (times[-1] - times[0]) / 1e9
        rate = (len(times) - 1) / span_s if span_s > 0 else 0.0
    most = most_in(times, 1_000_000_000)
    per = {}
    for r in rows:
        per[r[3] if len(r) > 3 else "-"] = per.get(r[3] if len(r) > 3 else "-", 0) + 1
    print("%s: %d in %.2f s%s = %.2f/s; most in any 1 s: %d; by machine: %s" % (
        a.what, len(times), span_s, " (first to last arrival)" if a.arrivals_span else "", rate, most,
        ", ".join("%s %.2f/s" % (k, (v - a.arrivals_span) / span_s) for k, v in sorted(per.items()))))
    # The whole seconds from the start to the last arrival, counted one by one:
    # the rate while demand stood, without the run's ragged last second (the
    # clients stop at their own times) - the figure make bench's table reports.
    first = a.start if a.start and not a.arrivals_span else times[0]
    whole = [sum(1 for t in times if first + k * 10**9 <= t < first + (k + 1) * 10**9)
             for k in range((times[-1] - first) // 10**9)]
    if whole:
        print("  whole seconds: %d, %.2f/s on average, fewest %d, most %d" % (
            len(whole), sum(whole) / len(whole), min(whole), max(whole)))
    if a.max_per_second is not None and most > a.max_per_second:
        print("FAIL: %d in one second, more than %d" % (most, a.max_per_second))
        return 1
    if a.rate is not None and abs(rate - a.rate) > a.rate * a.within / 100:
        print("FAIL: %.2f/s, not within %.1f%% of %.2f/s" % (rate, a.within, a.rate))
        return 1
    for s in a.share:
        dst, _, spec = s.partition("=")
        want, _, pct = spec.partition("/")
        got = (per.get(dst, 0) - (1 if a.arrivals_span else 0)) / span_s if span_s > 0 else 0.0
        if abs(got - float(want)) > float(want) * float(pct) / 100:
            print("FAIL: %s came at %.2f/s, not within %s%% of %s/s" % (dst, got, pct, want))
            return 1
    for s in a.reached:
        dst, _, spec = s.partition("=")
        want, _, limit = spec.partition("/")
        mine = sorted(int(r[0]) for r in rows if len(r) > 3 and r[3] == dst)
        need, half, when = 0.9 * float(want) * 0.5, 500_000_000, None
        j = 0
        for i in range(len(mine)):
            # Arrivals in the half second ending at arrival i.
            while mine[i] - mine[j] >= half:
                j += 1
            if i - j + 1 >= need:
                when = (mine[j] - a.start) / 1e9
                break
        if when is None:
            print("FAIL: %s never came to 90%% of %s/s over half a second" % (dst, want))
            return 1
        print("  %s came to 90%% of %s/s %.2f s after the start" % (dst, want, when))
        if when > float(limit):
            print("FAIL: %s took %.2f s to come to its share, more than %s s" % (dst, when, limit))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
