#!/usr/bin/env python3
"""The destination's witness: kernel receive timestamps of every TCP SYN sent to
--port on the loopback interface (or, with --what, of every request's first
segment, every datagram, or every payload segment and its length).

A packet socket on "lo" sees each SYN as the kernel handles it, and SO_TIMESTAMPNS
stamps it there (CLOCK_REALTIME, nanoseconds): neither the shim nor the server's
scheduling can move these times.  One line per SYN is appended to --out:
"REALTIME_NS FAMILY SRCPORT", and with --key a fourth field: the request's Host
header (host) or the packet's destination address (dst); with --ends-out, each client FIN or RST to the port
goes there the same way, so how many connections were open at once can be told
from kernel times too.  Writes --ready-file once capturing.  Needs root (or
CAP_NET_RAW), as the tests have.  Exits by itself after --lifetime seconds, or
at SIGTERM.

A witness that misses packets cannot witness: the kernel is asked to hand over only
packets to or from --port (a BPF filter, so 2,000 processes' other traffic on lo
does not fill the socket's buffer), and every packet the kernel still dropped for
want of room is counted and appended to OUT.drops.  The checkers (arrivals.py,
windows.py, bytes_check.py, and the chaos suite) refuse to judge a record that
has one: its verdict would be a guess either way.
"""
import argparse
import os
import signal
import socket
import struct
import time

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
SOL_PACKET, PACKET_STATISTICS = 263, 6
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
PACKET_OUTGOING = 4


def parse(frame):
    """(family, proto, sport, dport, tcp flags, payload length, destination address,
    payload offset, TCP sequence number or 0) of an IPv4 or IPv6 TCP or UDP frame,
    or None."""
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x0800 and len(frame) >= 34:
        ihl = (frame[14] & 0x0F) * 4
        proto, family, l4 = frame[23], 4, 14 + ihl
        l4_len = struct.unpack_from("!H", frame, 16)[0] - ihl
        dst = socket.inet_ntop(socket.AF_INET, bytes(frame[30:34]))
    elif ethertype == 0x86DD and len(frame) >= 54:
        proto, family, l4 = frame[20], 6, 54  # no extension headers on loopback
        l4_len = struct.unpack_from("!H", frame, 18)[0]
        dst = socket.inet_ntop(socket.AF_INET6, bytes(frame[38:54]))
    else:
        return None
    if proto == 6 and len(frame) >= l4 + 14:
        sport, dport = struct.unpack_from("!HH", frame, l4)
        doff = (frame[l4 + 12] >> 4) * 4
        seq = struct.unpack_from("!I", frame, l4 + 4)[0]
        return family, 6, sport, dport, frame[l4 + 13], l4_len - doff, dst, l4 + doff, seq
    if proto == 17 and len(frame) >= l4 + 8:
        sport, dport = struct.unpack_from("!HH", frame, l4)
        return family, 17, sport, dport, 0, l4_len - 8, dst, l4 + 8, 0
    return None


def host_of(payload):
    """The Host header of an HTTP request's first segment, lower case, or "-"."""
    for line in payload.split(b"\r\n")[1:]:
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            return value.strip().decode("latin-1").lower().split(":")[0] or "-"
    return "-"


def port_filter(port, snap, syn_only=False):
    """A classic BPF program: IPv4 or IPv6 (no extension headers, as on lo), TCP or
    UDP, source or destination port `port`; `snap` bytes of each kept.  Loopback
    shows each packet twice: the kernel drops the outgoing copy.  With `syn_only`,
    only TCP packets of `port` carrying SYN, FIN or RST are kept, SYN-ACKs not:
    what tells a connection's first SYN from a retransmitted one (Witness).  At
    5,000 connections a second the other packets (some 40,000 a second) cost the
    witness a good part of a core, taken from the programs it measures.  Jumps
    are written by label and turned into the relative offsets BPF takes."""
    ld_w, ld_h, ld_b, ld_h_ind, ld_b_ind, ldx_msh, jeq, ret = 0x20, 0x28, 0x30, 0x48, 0x50, 0xB1, 0x15, 0x06
    alu_and = 0x54
    pkttype = 0xFFFFF004  # SKF_AD_OFF + SKF_AD_PKTTYPE
    v4syn = [
        ("v4ports", ldx_msh, None, None, 14),    # X = IPv4 header length
        ("", ld_b_ind, None, None, 27),          # TCP flags
        ("", alu_and, None, None, 0x07),
        ("", jeq, "drop", None, 0),              # none of SYN, FIN, RST
        ("", ld_b_ind, None, None, 27),
        ("", alu_and, None, None, 0x12),
        ("", jeq, "drop", None, 0x12),           # a SYN-ACK
        ("", ld_h_ind, None, None, 14),          # source port
        ("", jeq, "accept", None, port),
        ("", ld_h_ind, None, None, 16),          # destination port
        ("", jeq, "accept", "drop", port),
    ]
    v6syn = [
        ("v6ports", ld_b, None, None, 67),
        ("", alu_and, None, None, 0x07),
        ("", jeq, "drop", None, 0),
        ("", ld_b, None, None, 67),
        ("", alu_and, None, None, 0x12),
        ("", jeq, "drop", None, 0x12),
        ("", ld_h, None, None, 54),
        ("", jeq, "accept", None, port),
        ("", ld_h, None, None, 56),
        ("", jeq, "accept", "drop", port),
    ]
    prog = [
        ("", ld_w, None, None, pkttype),
        ("", jeq, "drop", None, PACKET_OUTGOING),
        ("", ld_h, None, None, 12),              # ethertype
        ("", jeq, None, "v6", 0x0800),
        ("", ld_b, None, None, 23),              # IPv4 protocol
    ] + ([
        ("", jeq, "v4ports", "drop", 6),
    ] + v4syn if syn_only else [
        ("", jeq, "v4ports", None, 6),
        ("", jeq, "v4ports", "drop", 17),
        ("v4ports", ldx_msh, None, None, 14),    # X = IPv4 header length
        ("", ld_h_ind, None, None, 14),          # source port
        ("", jeq, "accept", None, port),
        ("", ld_h_ind, None, None, 16),          # destination port
        ("", jeq, "accept", "drop", port),
    ]) + [
        ("v6", jeq, None, "drop", 0x86DD),
        ("", ld_b, None, None, 20),              # IPv6 next header
    ] + ([
        ("", jeq, "v6ports", "drop", 6),
    ] + v6syn if syn_only else [
        ("", jeq, "v6ports", None, 6),
        ("", jeq, "v6ports", "drop", 17),
        ("v6ports", ld_h, None, None, 54),
        ("", jeq, "accept", None, port),
        ("", ld_h, None, None, 56),
        ("", jeq, "accept", "drop", port),
    ]) + [
        ("drop", ret, None, None, 0),
        ("accept", ret, None, None, snap),
    ]
    at = {label: i for i, (label, *_rest) in enumerate(prog) if label}
    out = []
    for i, (_label, code, jt, jf, k) in enumerate(prog):
        off = lambda to: 0 if to is None else at[to] - (i + 1)
        out.append(struct.pack("HBBI", code, off(jt), off(jf), k))
    return b"".join(out), len(prog)


def attach_filter(s, port, snap, syn_only=False):
    import ctypes
    code, n = port_filter(port, snap, syn_only)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", n, ctypes.addressof(buf))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    return buf  # kept alive while the filter is attached (the kernel copies it anyway)


def missed(out):
    """Packets the witness writing OUT missed: 0 when its record is whole."""
    try:
        with open(out + ".drops") as f:
            return sum(int(x) for x in f if x.strip())
    except FileNotFoundError:
        return 0


def drops(s):
    """Packets the kernel dropped for this socket since the last call (reading the
    statistics resets them)."""
    raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    return struct.unpack("II", raw)[1]


class Witness:
    """What is recorded, frame by frame: SYNs (the default); or each connection's
    first payload segment (first: a first write held); or the first segment of each
    request - a client's payload that begins its turn (the connection's first, or
    the first after the server has sent), as a server sees requests come; or
    datagrams; or every payload segment with the new bytes it carries (bytes: a
    segment sent again counts only what no earlier one carried); or each HTTP/2
    stream a client opens (h2streams: the segment that carries its HEADERS)."""

    # A SYN again from a client port whose connection has not ended, within this
    # long of its first, is the kernel sending it again (no SYN-ACK came: the
    # server's queue was full), not a new connection: not recorded.
    RESENT_NS = 3_000_000_000

    def __init__(self, port, what, dst=None, key=None):
        self.port, self.what, self.dst, self.key = port, what, dst, key
        self.turn = {}  # (family, client port) -> the client is mid-turn
        self.syn_at = {}  # (family, client port) -> its first SYN, until it ends
        self.syn_seq = {}  # (family, client port) -> (ISN, time) of its last SYN recorded
        self.sent_to = {}  # bytes: (family, client port) -> the sequence number after
                           # the last new byte seen
        self.h2 = {}  # h2streams: (family, client port) -> where its frames stand

    def see(self, frame, ends, ns=0):
        hit = self.see_packet(frame, ends, ns)
        if hit and hit[2] == "hit" and self.key:
            p = parse(frame)
            if self.key == "dst":
                return hit + (p[6],)
            return hit + (host_of(bytes(frame[p[7]:p[7] + p[5]])),)
        return hit

    def see_packet(self, frame, ends, ns=0):
        p = parse(frame)
        if not p:
            return None
        family, proto, sport, dport, flags, length, dst, _, seq = p
        if proto == 6 and flags & 0x05:  # FIN or RST, either way: that connection ends
            self.syn_at.pop((family, dport if sport == self.port else sport), None)
        if self.dst and sport != self.port and dst != self.dst:
            return None  # to another address on the same port
        if self.what == "datagram":
            return (family, sport, "hit") if proto == 17 and dport == self.port else None
        if proto != 6:
            return None
        if sport == self.port and length > 0:  # the server answers: a new turn may begin
            if self.what == "request":
                self.turn[(family, dport)] = False
            return None
        if dport != self.port:
            return None
        if flags & 0x02 and not flags & 0x10:  # a SYN: a new connection from sport
            first = self.syn_at.get((family, sport))
            if first is not None and ns - first < self.RESENT_NS:
                return None  # sent again
            # The same initial sequence number again is the same connection's SYN
            # sent again, even where a FIN or RST on that port came between (one
            # of an earlier connection's, or the server's): a new connection's
            # ISN is drawn afresh (RFC 6528), a clock ticking every 64 ns in it.
            last = self.syn_seq.get((family, sport))
            if last is not None and last[0] == seq and ns - last[1] < self.RESENT_NS:
                return None
            self.syn_seq[(family, sport)] = (seq, ns)
            self.syn_at[(family, sport)] = ns
            self.sent_to[(family, sport)] = (seq + 1) & 0xFFFFFFFF
            # With TCP Fast Open the SYN carries the first request.
            data = length > 0 and self.what in ("first", "request")
            self.turn[(family, sport)] = data
            return (family, sport, "hit") if self.what == "syn" or data else None
        if ends and flags & 0x05:  # FIN or RST: the client's side of the connection ends
            return family, sport, "end"
        if self.what == "bytes" and length > 0:
            # Only bytes not seen before: a segment sent again (the receiver
            # dropped it, its buffer full) counts once, at its first arrival.
            end, last = (seq + length) & 0xFFFFFFFF, self.sent_to.get((family, sport))
            new = length if last is None else (end - last) & 0xFFFFFFFF
            if new == 0 or new >= 1 << 31:
                return None
            self.sent_to[(family, sport)] = end
            return family, sport, "hit", min(new, length)
        if self.what == "first" and length > 0:
            if not self.turn.get((family, sport)):
                self.turn[(family, sport)] = True  # until the next SYN on this port
                return family, sport, "hit"
            return None
        if self.what == "request" and length > 0:
            if not self.turn.get((family, sport)):
                self.turn[(family, sport)] = True
                return family, sport, "hit"
        if self.what == "h2streams" and length > 0:
            return self.h2_stream(family, sport, seq, bytes(frame[p[7]:p[7] + length]))
        return None

    H2_PREFACE = 24  # "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def h2_stream(self, family, sport, seq, data):
        """h2streams: a connection's HTTP/2 frames followed from its first byte
        (prior knowledge: the preface, then frames); a hit for each HEADERS that
        opens a stream the client had not opened before - a request, as the
        server's kernel received it.  Bytes sent again count once; a connection
        whose bytes cannot be followed (a gap in what was seen) is left."""
        key = (family, sport)
        st = self.h2.get(key)
        if st is None:
            if key not in self.sent_to:
                return None  # its SYN not seen: cannot be followed
            st = self.h2[key] = {"skip": self.H2_PREFACE, "left": 0, "hdr": b"", "streams": set()}
        want = self.sent_to[key]
        off = (want - seq) & 0xFFFFFFFF
        if off >= 1 << 31:
            st["broken"] = True  # a gap: bytes before these were not seen
        if st.get("broken") or off >= len(data):
            return None
        data = data[off:]
        self.sent_to[key] = (seq + off + len(data)) & 0xFFFFFFFF
        opened, i = False, 0
        while i < len(data):
            if st["skip"]:
                n = min(st["skip"], len(data) - i)
                st["skip"] -= n
                i += n
            elif st["left"]:
                n = min(st["left"], len(data) - i)
                st["left"] -= n
                i += n
            else:
                n = min(9 - len(st["hdr"]), len(data) - i)
                st["hdr"] += data[i:i + n]
                i += n
                if len(st["hdr"]) == 9:
                    h, st["hdr"] = st["hdr"], b""
                    st["left"] = int.from_bytes(h[0:3], "big")
                    stream = int.from_bytes(h[5:9], "big") & 0x7FFFFFFF
                    if h[3] == 1 and stream % 2 == 1 and stream not in st["streams"]:
                        st["streams"].add(stream)
                        opened = True
        return (family, sport, "hit") if opened else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--interface", default="lo",
                    help="the interface to watch (default lo; make bench's veth rows watch the "
                         "namespace's end of their pair)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    ap.add_argument("--ends-out", help="also record the client's FIN or RST of each "
                                       "connection there, to measure how many were open")
    ap.add_argument("--dst", help="only packets to this address (the server's answers are "
                                  "seen whatever their source)")
    ap.add_argument("--what", choices=["syn", "first", "request", "datagram", "bytes", "h2streams"], default="syn",
                    help="what to record (see Witness)")
    ap.add_argument("--key", choices=["host", "dst"],
                    help="add a field to each hit: the request's Host header, or the destination")
    args = ap.parse_args()
    # Headers suffice, but a Host is in the payload, and HTTP/2's frames anywhere in it.
    want = 65600 if args.what == "h2streams" else 4096 if args.key == "host" else 256
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    # Only SYNs matter when SYNs alone are recorded (and no connection's end).
    syn_only = args.what == "syn" and not args.ends_out
    keep = attach_filter(s, args.port, want, syn_only)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((args.interface, 0))
    s.settimeout(0.5)
    drops(s)  # from here on, every drop counts
    stop = []

    def on_term(*_):
        # Out at once, not at recvmsg's next timeout: a test that starts the next
        # witness on the same file right after this one's kill saw this one, up to
        # 0.5 s later, append the next client's first SYN there too.
        if not stop:
            stop.append(1)
            raise Stopped()

    signal.signal(signal.SIGTERM, on_term)
    with open(args.ready_file, "w") as f:
        f.write("ready\n")
    end = time.monotonic() + args.lifetime
    ends = open(args.ends_out, "a") if args.ends_out else None
    witness = Witness(args.port, args.what, args.dst, args.key)
    with open(args.out, "a") as out:
        try:
            watch(s, want, end, stop, witness, out, ends, args.out)
        except Stopped:
            pass
    n = drops(s)
    if n:
        with open(args.out + ".drops", "a") as d:
            d.write("%d\n" % n)
    del keep


class Stopped(Exception):
    """SIGTERM: the witness ends."""


def watch(s, want, end, stop, witness, out, ends, out_path):
    """Record what the witness sees until `end` or a stop."""
    checked = time.monotonic()
    while time.monotonic() < end and not stop:
        if time.monotonic() - checked > 0.2:
            checked = time.monotonic()
            n = drops(s)
            if n:
                with open(out_path + ".drops", "a") as d:
                    d.write("%d\n" % n)
        try:
            frame, anc, _, addr = s.recvmsg(want, socket.CMSG_SPACE(16))
        except (socket.timeout, InterruptedError):
            continue
        if addr[2] == PACKET_OUTGOING:
            continue  # loopback shows each packet twice: keep the arrival
        ns = None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
                sec, nsec = struct.unpack_from("ll", data)
                ns = sec * 1_000_000_000 + nsec
        if ns is None:
            ns = time.time_ns()
        hit = witness.see(frame, ends is not None, ns)
        if not hit:
            continue
        to = out if hit[2] == "hit" else ends
        to.write("%d %d %d%s\n" % (ns, hit[0], hit[1], "".join(" %s" % f for f in hit[3:])))
        to.flush()


if __name__ == "__main__":
    main()
