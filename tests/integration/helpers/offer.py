#!/usr/bin/env python3
"""offer.py ADDR PORT RATE SECONDS [--procs N] [--start-after S] [--at WALL]
[--every P --phase F]: offer RATE
connections a second to ADDR:PORT for SECONDS, from N processes (a connect held by
the shim holds only its own process, so the others go on offering and the machine's
demand shows as a queue).  Each process paces itself on its own schedule and skips
ahead rather than bunching when a connect came back late.  Prints the connects
made, all processes together.  Every loop ends by its deadline.  --at starts at
that CLOCK_REALTIME second instead (so processes started apart begin together);
--every P --phase F offers only in the second [F, F+1) of each P seconds from the
start (demand that moves among machines).
"""
import argparse
import multiprocessing
import socket
import time


def worker(addr, port, rate, start, end, out, every=0.0, phase=0.0, origin=0.0):
    made, interval = 0, 1.0 / rate
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
    a = ap.parse_args()
    if a.at:
        a.start_after = max(0.0, a.at - time.time())
    start = time.monotonic() + a.start_after
    end = start + a.seconds
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(a.addr, a.port, a.rate / a.procs,
                                                          start + i / a.rate, end, out, a.every, a.phase,
                                                          start))
             for i in range(a.procs)]
    for p in procs:
        p.start()
    total = sum(out.get(timeout=a.start_after + a.seconds + 60) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    print(total)


if __name__ == "__main__":
    main()
