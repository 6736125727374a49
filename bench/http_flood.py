#!/usr/bin/env python3
"""http_flood.py HOST PORT COUNT [--concurrency C]: COUNT HTTP/1.0 GETs to
HOST:PORT, each on a connection of its own, C in flight at a time (asyncio), as
fast as the server answers.  For make bench's nginx rows: the clients of an
egress proxy that holds them to a rate.  Prints the answers that came back 200.
Every request ends by a 60 s timeout."""
import argparse
import asyncio


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    left, ok = [a.count], [0]

    async def one():
        r, w = await asyncio.wait_for(asyncio.open_connection(a.host, a.port), 60)
        w.write(b"GET / HTTP/1.0\r\nHost: dest\r\n\r\n")
        await w.drain()
        head = await asyncio.wait_for(r.read(), 60)
        w.close()
        return head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.0 200")

    async def worker():
        while left[0] > 0:
            left[0] -= 1
            try:
                ok[0] += await one()
            except (OSError, asyncio.TimeoutError):
                pass

    await asyncio.gather(*(worker() for _ in range(a.concurrency)))
    print(ok[0])


asyncio.run(main())
