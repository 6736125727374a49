#!/usr/bin/env python3
"""answers_client.py BASE_URL SECONDS [--procs N] [--cue AT:PATH]... [--keep] [--cafile PEM]

N processes (default 4) each send GETs to BASE_URL/n as fast as they are let go,
a new connection each (--keep: one keep-alive connection each), for SECONDS; the
first process also sends each cue - a GET of BASE_URL + PATH - AT seconds after the
start (the server answers it as the path says: helpers/answers_server.py).  Run
under the shim, every request waits in the same queue.  Prints how many answers of
each status came back; exits non-zero if a request failed other than by a status.
Every loop ends by its deadline.
"""
import argparse
import http.client
import ssl
import multiprocessing
import sys
import time
import urllib.parse


def worker(base, seconds, cues, keep, cafile, out):
    u = urllib.parse.urlsplit(base)
    end = time.monotonic() + seconds
    start = time.monotonic()
    cues = sorted(cues)
    counts, errors, conn = {}, 0, None
    n = 0
    while time.monotonic() < end:
        path = "%s/n%d" % (u.path, n)
        if cues and time.monotonic() - start >= cues[0][0]:
            path = u.path + cues.pop(0)[1]
        n += 1
        try:
            if conn is None and u.scheme == "https":
                ctx = ssl.create_default_context(cafile=cafile)
                conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=60, context=ctx)
            elif conn is None:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            conn.request("GET", path, headers={} if keep else {"Connection": "close"})
            r = conn.getresponse()
            r.read()
            counts[r.status] = counts.get(r.status, 0) + 1
            if not keep:
                conn.close()
                conn = None
        except OSError as e:
            errors += 1
            print("request %s: %s" % (path, e), file=sys.stderr)
            conn = None
            time.sleep(0.01)
    out.put((counts, errors))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--cue", action="append", default=[])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cafile")
    a = ap.parse_args()
    cues = [(float(c.split(":", 1)[0]), c.split(":", 1)[1]) for c in a.cue]
    out = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=worker, args=(a.base, a.seconds, cues if i == 0 else [], a.keep, a.cafile, out))
          for i in range(a.procs)]
    for p in ps:
        p.start()
    total, errors = {}, 0
    for _ in ps:
        c, e = out.get(timeout=a.seconds + 120)
        errors += e
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    for p in ps:
        p.join()
    print("answers: %s; errors: %d" % (" ".join("%d=%d" % kv for kv in sorted(total.items())), errors))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
