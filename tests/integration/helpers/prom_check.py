#!/usr/bin/env python3
"""prom_check.py FILE [--expect NAME{LABELS}=VALUE]... [--max-series NAME=N]: check that
FILE is Prometheus text exposition (format 0.0.4) as a scraper reads it, and print
its samples' count.  Checked: every line a comment (# HELP / # TYPE, each family
typed once, before its samples), a blank, or a sample `name{label="value",...}
value`; names and label names as the format allows them; values as floats; counters
and histogram series named as their types want; histogram buckets cumulative, le
increasing, +Inf equal to _count.  --expect: a sample's value (a number, or >N);
--max-series: at most N samples of a family.  Exits 1 on the first failure."""
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def labels_of(text):
    out, pos = {}, 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            fail("bad labels: {%s}" % text)
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    expects, maxes = [], {}
    while args:
        flag, val = args.pop(0), args.pop(0)
        if flag == "--expect":
            expects.append(val)
        elif flag == "--max-series":
            n, c = val.rsplit("=", 1)
            maxes[n] = int(c)
    types, samples = {}, []
    for ln, line in enumerate(open(path).read().split("\n"), 1):
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not NAME.match(parts[2]):
                    fail("line %d: bad name %r" % (ln, parts[2]))
                if parts[1] == "TYPE":
                    if parts[2] in types:
                        fail("line %d: %s typed twice" % (ln, parts[2]))
                    if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                        fail("line %d: bad type" % ln)
                    types[parts[2]] = parts[3]
            continue
        m = SAMPLE.match(line)
        if not m:
            fail("line %d: not a sample: %r" % (ln, line))
        name, labels, value = m.group(1), labels_of(m.group(3) or ""), m.group(4)
        try:
            v = float(value)
        except ValueError:
            fail("line %d: bad value %r" % (ln, value))
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        if family not in types:
            fail("line %d: %s has no TYPE before it" % (ln, name))
        t = types[family]
        if t == "counter" and not name.endswith("_total"):
            fail("line %d: counter %s does not end in _total" % (ln, name))
        if t == "histogram" and name == family:
            fail("line %d: histogram sample without _bucket/_sum/_count" % ln)
        samples.append((name, labels, v))
    # histograms
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for name, labels, v in samples:
            if name == fam + "_bucket":
                key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
                series.setdefault(key, []).append((float(labels["le"]), v))
        counts = {tuple(sorted(l.items())): v for n, l, v in samples if n == fam + "_count"}
        for key, buckets in series.items():
            les = [b[0] for b in buckets]
            if les != sorted(les) or les[-1] != float("inf"):
                fail("%s%s: le not increasing to +Inf" % (fam, dict(key)))
            vals = [b[1] for b in buckets]
            if vals != sorted(vals):
                fail("%s%s: buckets not cumulative" % (fam, dict(key)))
            if counts.get(key) != vals[-1]:
                fail("%s%s: +Inf bucket differs from _count" % (fam, dict(key)))
    for e in expects:
        m = re.match(r"(.*[}\w])(=|>)([-+.\w]+)$", e)
        if not m:
            fail("bad --expect %r" % e)
        sel, want = m.group(1), (">" if m.group(2) == ">" else "") + m.group(3)
        m = SAMPLE.match(sel + " 0")
        name, labels = m.group(1), labels_of(m.group(3) or "")
        got = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
        if not got:
            fail("no sample %s" % sel)
        ok = got[0] > float(want[1:]) if want.startswith(">") else got[0] == float(want)
        if not ok:
            fail("%s is %g, wanted %s" % (sel, got[0], want))
    for fam, n in maxes.items():
        c = sum(1 for name, _, _ in samples if name == fam)
        if c > n:
            fail("%d samples of %s, more than %d" % (c, fam, n))
    print("%s: %d samples in %d families, well formed" % (path, len(samples), len(types)))


if __name__ == "__main__":
    main()
