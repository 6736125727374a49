#!/usr/bin/env python3
"""The destination's witness of connection attempts: kernel receive timestamps of
every TCP SYN sent to --port on the loopback interface.

A packet socket on "lo" sees each SYN as the kernel handles it, and SO_TIMESTAMPNS
stamps it there (CLOCK_REALTIME, nanoseconds): neither the shim nor the server's
scheduling can move these times.  One line per SYN is appended to --out:
"REALTIME_NS FAMILY SRCPORT"; with --ends-out, each client FIN or RST to the port
goes there the same way, so how many connections were open at once can be told
from kernel times too.  Writes --ready-file once capturing.  Needs root (or
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


def syn_of(frame, port, ends=False):
    """(family, source port, kind) when the frame is a SYN (not SYN-ACK) to port -
    kind "syn" - or, with `ends`, a FIN or RST to it - kind "end"."""
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
    if dport != port:
        return None
    if flags & 0x02 and not flags & 0x10:
        return family, sport, "syn"
    if ends and flags & 0x05:  # FIN or RST: the client's side of the connection ends
        return family, sport, "end"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    ap.add_argument("--ends-out", help="also record the client's FIN or RST of each "
                                       "connection there, to measure how many were open")
    args = ap.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("lo", 0))
    s.settimeout(0.5)
    with open(args.ready_file, "w") as f:
        f.write("ready\n")
    end = time.monotonic() + args.lifetime
    ends = open(args.ends_out, "a") if args.ends_out else None
    with open(args.out, "a") as out:
        while time.monotonic() < end:
            try:
                frame, anc, _, addr = s.recvmsg(256, socket.CMSG_SPACE(16))
            except socket.timeout:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue  # loopback shows each packet twice: keep the arrival
            hit = syn_of(frame, args.port, ends is not None)
            if not hit:
                continue
            ns = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
                    sec, nsec = struct.unpack_from("ll", data)
                    ns = sec * 1_000_000_000 + nsec
            if ns is None:
                ns = time.time_ns()
            to = out if hit[2] == "syn" else ends
            to.write("%d %d %d\n" % (ns, hit[0], hit[1]))
            to.flush()


if __name__ == "__main__":
    main()
