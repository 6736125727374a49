#!/usr/bin/env python3
"""offer.py ADDR PORT RATE SECONDS [--procs N] [--start-after S] [--at WALL]
[--every P --phase F] [--redis-gcra PORT --limit R]: offer RATE
connections a second to ADDR:PORT for SECONDS, from N processes (a connect held by
the shim holds only its own process, so the others go on offering and the machine's
demand shows as a queue).  Each process paces itself on its own schedule and skips
ahead rather than bunching when a connect came back late.  Prints the connects
made, all processes together.  Every loop ends by its deadline.  --at starts at
that CLOCK_REALTIME second instead (so processes started apart begin together);
--every P --phase F offers only in the second [F, F+1) of each P seconds from the
start (demand that moves among machines).  --redis-gcra PORT makes each connect
wait first for a slot of a fleet-wide limit of R a second reserved through the
Redis on 127.0.0.1:PORT, one call a request (GCRA_SCRIPT): the simplest limiter a
fleet could run instead of sluice, make bench's baseline (bench/fleet_scale.sh).
"""
import argparse
import multiprocessing
import socket
import time


# One reservation: the fleet's next slot on Redis's own clock, tat moved on by an
# interval; the answer is how many microseconds from now the slot starts.  The
# key expires once its tat has passed by a second, as an idle limit's should.
GCRA_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local inc = tonumber(ARGV[1])
redis.call('SET', KEYS[1], tat + inc, 'PX', math.floor((tat + inc - now) / 1000) + 1000)
return tat - now
"""


class RedisGcra:
    """A connection to Redis speaking just enough RESP for EVALSHA and SCRIPT LOAD."""

    def __init__(self, port, limit):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.inc = str(max(1, int(1e6 / limit)))
        self.sha = self.call("SCRIPT", "LOAD", GCRA_SCRIPT)

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        line = self.line()
        if line[:1] == b"$":
            n = int(line[1:])
            while len(self.buf) < n + 2:
                self.fill()
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value.decode()
        if line[:1] == b":":
            return int(line[1:])
        raise OSError("redis: %r" % line)

    def fill(self):
        chunk = self.sock.recv(4096)
        if not chunk:
            raise OSError("redis closed the connection")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def wait_us(self):
        return self.call("EVALSHA", self.sha, "1", "sluice-bench:gcra", self.inc)


def worker(addr, port, rate, start, end, out, every=0.0, phase=0.0, origin=0.0, gcra=None):
    made, interval = 0, 1.0 / rate
    limiter = RedisGcra(*gcra) if gcra else None
    due = start
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if every:
            into = (now - origin) % every
            if not phase <= into < phase + 1:
                due = now + (phase - into) % every  # the next active second
        if now < due:
            time.sleep(min(due - now, end - now))
            continue
        try:
            if limiter:
                time.sleep(limiter.wait_us() / 1e6)
            socket.create_connection((addr, port), timeout=max(1.0, end - now + 5)).close()
            made += 1
        except OSError:
            pass
        due = max(due + interval, time.monotonic() - interval)
    out.put(made)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("rate", type=float)
    ap.add_argument("seconds", type=float)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--start-after", type=float, default=0.0)
    ap.add_argument("--at", type=float, default=0.0)
    ap.add_argument("--every", type=float, default=0.0)
    ap.add_argument("--phase", type=float, default=0.0)
    ap.add_argument("--redis-gcra", type=int, help="the baseline limiter's Redis port")
    ap.add_argument("--limit", type=float, default=100.0, help="with --redis-gcra: the fleet's rate")
    a = ap.parse_args()
    if a.at:
        a.start_after = max(0.0, a.at - time.time())
    start = time.monotonic() + a.start_after
    end = start + a.seconds
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(a.addr, a.port, a.rate / a.procs,
                                                          start + i / a.rate, end, out, a.every, a.phase,
                                                          start, (a.redis_gcra, a.limit) if a.redis_gcra else None))
             for i in range(a.procs)]
    for p in procs:
        p.start()
    total = sum(out.get(timeout=a.start_after + a.seconds + 60) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    print(total)


if __name__ == "__main__":
    main()
