#!/usr/bin/env python3
"""Fetch URL N times with python3 urllib, a new connection each time, optionally from
several threads; checks every body and exits non-zero on any failure."""
import sys
import threading
import urllib.request


def fetch(url, count, errors):
    for i in range(count):
        u = "%s?r=%d" % (url, i)
        try:
            with urllib.request.urlopen(u, timeout=60) as r:
                body = r.read().decode()
            path = u.split("/", 3)[3]
            if body != "hello /%s\n" % path:
                errors.append("bad body for %s: %r" % (u, body))
        except Exception as e:  # reported, and fails the run
            errors.append("%s: %s" % (u, e))


def main():
    url, count = sys.argv[1], int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    errors = []
    ts = [threading.Thread(target=fetch, args=("%s/t%d" % (url, t), count, errors))
          for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
