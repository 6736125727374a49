#!/usr/bin/env python3
"""keepalive_server.py PORT_FILE [PORT]: an asyncio HTTP/1.1 server on 127.0.0.1 that
answers every request with a short 200 and keeps the connection open, for make
bench's memory figures (thousands of connections held at once).  Exits after
120 s.  PORT: listen there (default: any free port).  Its port is written to
PORT_FILE when it listens."""
import asyncio
import os
import sys


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0,
                                        backlog=4096, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    await asyncio.sleep(120)


asyncio.run(main())
