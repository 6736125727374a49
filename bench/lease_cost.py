#!/usr/bin/env python3
"""lease_cost.py PORT SCRIPT N CALLS: what one lease call costs Redis when N machines
share one rate item (make bench, item 20; docs/design.md, "At size").

N machines first call once each (their entries, and the item's running totals,
built), then CALLS calls come from machines picked at random, each with a demand
that moves, as a live fleet's do.  Redis's own accounting (INFO commandstats,
evalsha) gives the cost of a call; the grants in effect are checked against the
budget after every call, so a cheap call that gave away too much would show."""
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


def main():
    port, script, n, calls = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = Conn(port)
    sha = c.call("SCRIPT", "LOAD", open(script).read())
    limit = 100000  # 100/s, in thousandths
    budget = limit * 995 // 1000
    grant = [0] * n
    demand = [0] * n
    rng = random.Random(n)

    def lease(m):
        r = c.call("EVALSHA", sha, 3, "sluice:{b}:epoch", "sluice:{b}:i:api:r", "sluice:{b}:i:api:r:pause",
                   "m%d" % m, 600000, 0, 995000, 1, "r", limit, 1000, demand[m], grant[m], 0)
        grant[m] = r[2]
        return r

    c.call("FLUSHALL")
    for m in range(n):
        demand[m] = rng.randrange(1, 4 * limit // n + 2)
        lease(m)
    c.call("CONFIG", "RESETSTAT")
    held = sum(grant)
    worst = held
    for _ in range(calls):
        m = rng.randrange(n)
        held -= grant[m]
        demand[m] = max(1, int(demand[m] * rng.uniform(0.7, 1.3)))
        lease(m)
        held += grant[m]
        worst = max(worst, held)
    stats = c.call("INFO", "commandstats")
    per = [l for l in stats.splitlines() if l.startswith("cmdstat_evalsha:")][0]
    fields = dict(kv.split("=") for kv in per.split(":", 1)[1].split(","))
    print("   %6d machines: %6.1f us a call (%s calls), grants in effect at most %.1f%% of the budget"
          % (n, float(fields["usec_per_call"]), fields["calls"], 100.0 * worst / budget))
    if worst > budget:
        print("   the grants in effect passed the budget: %d > %d" % (worst, budget))
        sys.exit(1)


if __name__ == "__main__":
    main()
