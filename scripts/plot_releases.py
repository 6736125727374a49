#!/usr/bin/env python3
"""Draw when a queue's requests reached the destination against the fixed-rate
schedule, as a PNG (gnuplot):

  plot_releases.py --arrivals LOG [--syns SYNS] --interval-ms MS --out FILE.png
                   [--title TEXT] [--data FILE]

LOG is the test receiver's log (helpers/server.py --log): "NS /WHO/..." per
request, WHO naming the process that sent it (it colours the points).  SYNS, when
given, is the kernel's record of the same connections (helpers/syn_witness.py):
its times are used instead of the receiver's, paired with LOG's requests in order
(the queue spaces them an interval apart, so the order is the same), when both
hold the same number.  The upper panel is each request's arrival against the
schedule line, one slot every MS from the first; the lower, each arrival's gap to
the one before less MS, in milliseconds: what the limit promises is that this is
never below zero, and how far above it shows each release's lateness.  Prints
one summary line.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def read_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].isdigit():
                rows.append((int(parts[0]), parts[1]))
    rows.sort()
    return rows


def read_syns(path):
    with open(path) as f:
        return sorted(int(line.split()[0]) for line in f if line.strip() and line.split()[0].isdigit())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrivals", required=True)
    ap.add_argument("--syns")
    ap.add_argument("--interval-ms", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="arrivals at the destination")
    ap.add_argument("--data", help="also keep the plotted table here")
    a = ap.parse_args()

    rows = read_rows(a.arrivals)
    if len(rows) < 2:
        sys.exit("plot_releases: fewer than two arrivals in %s" % a.arrivals)
    times = [t for t, _ in rows]
    clock = "the receiver's clock"
    if a.syns and os.path.exists(a.syns):
        syns = read_syns(a.syns)
        if len(syns) == len(rows):
            times, clock = syns, "kernel SYN timestamps"
    who = [path.strip("/").split("/")[0] or "?" for _, path in rows]
    interval = a.interval_ms * 1e6
    t0 = times[0]
    table = []
    for k, (t, w) in enumerate(zip(times, who)):
        over = (t - times[k - 1] - interval) / 1e6 if k else 0.0
        table.append((w, (t - t0) / 1e9, k + 1, over))
    span = (times[-1] - t0) / 1e9
    gaps = [(b - x) / 1e6 for x, b in zip(times, times[1:])]
    behind = (times[-1] - (t0 + (len(times) - 1) * interval)) / 1e6

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        labels = sorted(set(who))
        with open(data, "w") as f:
            # One gnuplot data block per sender, two blank lines apart (index N).
            for lab in labels:
                for w, t, k, off in table:
                    if w == lab:
                        f.write("%.6f %d %.3f\n" % (t, k, off))
                f.write("\n\n")
        if a.data:
            with open(a.data, "w") as f:
                f.write("# sender seconds request gap_less_interval_ms (%s)\n" % clock)
                for r in table:
                    f.write("%s %.6f %d %.3f\n" % r)
        per_s = 1000.0 / a.interval_ms
        script = os.path.join(tmp, "plot.gp")
        with open(script, "w") as f:
            f.write('set terminal pngcairo size 960,680 font "sans,10"\n')
            f.write('set output "%s"\n' % a.out.replace('"', ""))
            f.write("set multiplot layout 2,1 title \"%s\\n%d requests in %.2f s (%.2f/s; schedule %.4g/s), %s\"\n"
                    % (a.title.replace('"', ""), len(table), span, (len(table) - 1) / span if span else 0,
                       per_s, clock))
            f.write("set key top left\nset grid\n")
            f.write('set xlabel "seconds since the first arrival"\nset ylabel "request"\n')
            plots = ["(x * %.9g + 1) with lines lw 2 lc rgb \"#888888\" title \"schedule: one every %g ms\""
                     % (per_s, a.interval_ms)]
            for i, lab in enumerate(labels):
                plots.append('"%s" index %d using 1:2 with points pt 7 ps 0.8 lc %d title "%s"'
                             % (data, i, i + 2, lab))
            f.write("plot [0:%.6f] " % (span * 1.02 + 1e-3) + ", ".join(plots) + "\n")
            f.write('set xlabel "request"\nset ylabel "gap to the one before - %g ms (ms)"\n' % a.interval_ms)
            # Zero in view, and anything below it too: a gap shorter than the
            # interval is what the picture must never hide.
            lo, hi = min(min(r[3] for r in table), 0.0), max(max(r[3] for r in table), 0.001)
            f.write("set yrange [%.6f:%.6f]\n" % (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)))
            plots = ['"%s" index %d using 2:3 with impulses lw 2 lc %d title "%s"' % (data, i, i + 2, lab)
                     for i, lab in enumerate(labels)]
            f.write("plot " + ", ".join(plots) + "\n")
            f.write("unset multiplot\n")
        subprocess.run(["gnuplot", script], check=True)
    print("%s: %d requests from %d senders in %.2fs, gap min %.3f ms, max %.3f ms (interval %g ms); "
          "the last %.1f ms behind a schedule that never waits (%s)"
          % (a.out, len(table), len(set(who)), span, min(gaps), max(gaps), a.interval_ms, behind, clock))


if __name__ == "__main__":
    main()
