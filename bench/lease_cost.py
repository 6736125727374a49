#!/usr/bin/env python3
"""lease_cost.py PORT SCRIPT N CALLS: what one lease call costs Redis when N machines
share one rate item (make bench, item 20; docs/design.md, "At size").

N machines first call once each (their entries, and the item's running totals,
built), then CALLS calls come from machines picked at random, each with a demand
that moves, as a live fleet's do.  Redis's own accounting (INFO commandstats,
evalsha) gives the cost of a call; the grants in effect are checked against the
rate after every call, and the machines' runs of ranks on the grid (each holding
what it was last granted) for a rank held twice, so a cheap call that gave away
too much would show."""
import random
import socket
import sys


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return int(rest) if kind == b":" else rest.decode()
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.s.sendall(command(*args))
        return self.reply()


def decode_runs(vals):
    """The runs of ranks of one item's answer fields (from * 8192 + to; 0: none)."""
    return [(v // 8192, v % 8192) for v in vals if v]


def runs_text(runs):
    return ".".join("%d-%d" % r for r in runs) or "-"


def main():
    port, script, n, calls = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = Conn(port)
    sha = c.call("SCRIPT", "LOAD", open(script).read())
    limit = 100000  # 100/s, in thousandths
    budget = limit  # on the grid the whole rate is shared (fleet.lua)
    grant = [0] * n
    demand = [0] * n
    runs = [[] for _ in range(n)]
    rng = random.Random(n)
    item = "sluice:{b}:i:api:r"

    def lease(m):
        r = c.call("EVALSHA", sha, 6, "sluice:{b}:epoch", item, item + ":pause", item + ":exp",
                   item + ":totals", item + ":grid",
                   "m%d" % m, 600000, 0, 995000, 1, "g", limit, 1000, demand[m], grant[m], 0,
                   runs_text(runs[m]))
        grant[m] = r[3]
        runs[m] = decode_runs(r[3 + 5:3 + 21])
        return r

    def overlaps():
        """Ranks held by two machines at once (each holds what it was last granted)."""
        seen = {}
        for m in range(n):
            for a, b in runs[m]:
                for k in range(a, b):
                    if k in seen:
                        return "rank %d held by m%d and m%d" % (k, seen[k], m)
                    seen[k] = m
        return None

    c.call("FLUSHALL")
    for m in range(n):
        demand[m] = rng.randrange(1, 4 * limit // n + 2)
        lease(m)
    c.call("CONFIG", "RESETSTAT")
    held = sum(grant)
    worst = held
    clash = None
    for i in range(calls):
        m = rng.randrange(n)
        held -= grant[m]
        demand[m] = max(1, int(demand[m] * rng.uniform(0.7, 1.3)))
        lease(m)
        held += grant[m]
        worst = max(worst, held)
        if len(runs[m]) > 16 or sum(b - a for a, b in runs[m]) * limit // 4096 != grant[m]:
            clash = clash or "m%d: runs %r do not make its grant %d" % (m, runs[m], grant[m])
        if i % max(1, calls // 200) == 0 and clash is None:
            clash = overlaps()
    stats = c.call("INFO", "commandstats")
    per = [l for l in stats.splitlines() if l.startswith("cmdstat_evalsha:")][0]
    fields = dict(kv.split("=") for kv in per.split(":", 1)[1].split(","))
    print("   %6d machines: %6.1f us a call (%s calls), grants in effect at most %.1f%% of the rate, "
          "%d%% of it handed out at the end"
          % (n, float(fields["usec_per_call"]), fields["calls"], 100.0 * worst / budget,
             100 * held // budget))
    clash = clash or overlaps()
    if worst > budget or clash:
        print("   the grants in effect passed the rate (%d > %d), or two machines held one rank: %s"
              % (worst, budget, clash))
        sys.exit(1)


if __name__ == "__main__":
    main()
