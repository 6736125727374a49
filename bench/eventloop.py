#!/usr/bin/env python3
"""Event-loop latency while requests are held: asyncio opens N connections to a held
destination and, in the same loop, echoes over an unheld socketpair every 5 ms.
Prints the echo round trip p50/p99/max in microseconds, and how long the held
fetches took.  Run under `sluice run` with a config that holds PORT."""
import asyncio
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])


async def fetch(i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /b%d HTTP/1.0\r\n\r\n" % i)
    await w.drain()
    await r.read()
    w.close()


async def echo(stop, trips):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t0 = time.perf_counter_ns()
        await loop.sock_sendall(a, b"ping")
        await loop.sock_recv(b, 4)
        trips.append((time.perf_counter_ns() - t0) / 1000)
        await asyncio.sleep(0.005)


async def main():
    stop, trips = asyncio.Event(), []
    e = asyncio.create_task(echo(stop, trips))
    t0 = time.monotonic()
    await asyncio.gather(*(fetch(i) for i in range(n)))
    span = time.monotonic() - t0
    stop.set()
    await e
    trips.sort()
    q = lambda p: trips[min(len(trips) - 1, int(p * len(trips)))]
    print("   %d held fetches took %.2f s; unheld echo round trip p50 %.0f us, p99 %.0f us, "
          "max %.0f us (%d trips)" % (n, span, q(0.5), q(0.99), trips[-1], len(trips)))


asyncio.run(main())
