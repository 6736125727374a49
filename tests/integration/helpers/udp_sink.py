#!/usr/bin/env python3
"""A local UDP receiver: logs each datagram as "MONOTONIC_NS PAYLOAD" to --log.

Binds 127.0.0.1 on a free port, writes the port to --port-file, and exits by itself
after --lifetime seconds.
"""
import argparse
import os
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    args = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % s.getsockname()[1])
    os.rename(tmp, args.port_file)
    end = time.monotonic() + args.lifetime
    with open(args.log, "a", buffering=1) as log:
        while time.monotonic() < end:
            try:
                data = s.recv(65536)
            except socket.timeout:
                continue
            log.write("%d %s\n" % (time.monotonic_ns(), data.decode(errors="replace").strip()))


if __name__ == "__main__":
    main()
