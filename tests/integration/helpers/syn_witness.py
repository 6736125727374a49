#!/usr/bin/env python3
"""The destination's witness of connection attempts: kernel receive timestamps of
every TCP SYN sent to --port on the loopback interface.

A packet socket on "lo" sees each SYN as the kernel handles it, and SO_TIMESTAMPNS
stamps it there (CLOCK_REALTIME, nanoseconds): neither the shim nor the server's
scheduling can move these times.  One line per SYN is appended to --out:
"REALTIME_NS FAMILY SRCPORT".  Writes --ready-file once capturing.  Needs root (or
CAP_NET_RAW), as the tests have.  Exits by itself after --lifetime seconds.
"""
import argparse
import os
import socket
import struct
import time

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
PACKET_OUTGOING = 4


def syn_of(frame, port):
    """(family, source port) when the frame is a SYN (not SYN-ACK) to port."""
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x0800 and len(frame) >= 34:
        ihl = (frame[14] & 0x0F) * 4
        if frame[23] != 6:
            return None
        tcp = 14 + ihl
        family = 4
    elif ethertype == 0x86DD and len(frame) >= 54:
        if frame[20] != 6:  # next header TCP (no extension headers on loopback)
            return None
        tcp = 54
        family = 6
    else:
        return None
    if len(frame) < tcp + 14:
        return None
    sport, dport = struct.unpack_from("!HH", frame, tcp)
    flags = frame[tcp + 13]
    if dport != port or not (flags & 0x02) or (flags & 0x10):
        return None
    return family, sport


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    args = ap.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("lo", 0))
    s.settimeout(0.5)
    with open(args.ready_file, "w") as f:
        f.write("ready\n")
    end = time.monotonic() + args.lifetime
    with open(args.out, "a") as out:
        while time.monotonic() < end:
            try:
                frame, anc, _, addr = s.recvmsg(256, socket.CMSG_SPACE(16))
            except socket.timeout:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue  # loopback shows each packet twice: keep the arrival
            hit = syn_of(frame, args.port)
            if not hit:
                continue
            ns = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
                    sec, nsec = struct.unpack_from("ll", data)
                    ns = sec * 1_000_000_000 + nsec
            if ns is None:
                ns = time.time_ns()
            out.write("%d %d %d\n" % (ns, hit[0], hit[1]))
            out.flush()


if __name__ == "__main__":
    main()
