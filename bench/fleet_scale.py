#!/usr/bin/env python3
"""fleet_scale.py SYNLOG T0 T1 RATE: from the SYN witness's record (CLOCK_REALTIME
ns first on each line), the arrivals from two seconds after T0 to T1: the rate
delivered, the most in any one-second span, the fewest in a whole second."""
import sys


def main():
    path, t0, t1, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    start = t0 + 2 * 10**9  # the clients' start, and the shares' first rounds
    ts = sorted(int(l.split()[0]) for l in open(path) if l.strip() and start <= int(l.split()[0]) < t1)
    secs = (t1 - start) / 1e9
    most, j = 0, 0
    for i in range(len(ts)):
        while ts[i] - ts[j] >= 10**9:
            j += 1
        most = max(most, i - j + 1)
    per = [0] * int(secs)
    for t in ts:
        k = (t - start) // 10**9
        if k < len(per):
            per[k] += 1
    print("%-34s %.2f/s of %g/s (%.1f%%)" % ("delivered after 2 s:", len(ts) / secs, rate,
                                             100 * len(ts) / secs / rate))
    if len(sys.argv) > 5:
        print("seconds:", per)
    print("%-34s %d most in any 1 s span, %d fewest in a whole second" % ("per second:", most,
                                                                          min(per) if per else 0))


if __name__ == "__main__":
    main()
