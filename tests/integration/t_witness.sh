#!/usr/bin/env bash
# tier: check
# The witness itself (tests/integration/helpers/syn_witness.py), fed frames
# built here: every test's verdict rests on what it counts as a new connection.
#  - a SYN sent again from a port whose connection has not ended is not counted;
#  - nor is one sent again after a FIN or RST on that port came between (its
#    initial sequence number is the first one's: the same connection);
#  - a SYN with a new sequence number after the end is a new connection;
#  - a new connection from a port within 3 s of its last, with a new sequence
#    number, is counted.
. "$(dirname "$0")/lib.sh"

python3 - "$HELPERS" <<'PY' || fail "the witness miscounted (above)"
import socket, struct, sys
sys.path.insert(0, sys.argv[1])
import syn_witness

def frame(sport, dport, flags, seq):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0,
                     socket.inet_aton("127.0.0.1"), socket.inet_aton("127.0.0.1"))
    return bytearray(b"\0" * 12 + b"\x08\x00" + ip + tcp)

SYN, RST, FIN_ACK = 0x02, 0x04, 0x11
w = syn_witness.Witness(8080, "syn")
ms = 1_000_000
seen = []
for at, pkt in [
    (0, frame(40000, 8080, SYN, 1000)),           # a connection: counted
    (1000 * ms, frame(40000, 8080, SYN, 1000)),   # sent again, no end between
    (1010 * ms, frame(8080, 40000, RST, 0)),      # the server resets that port
    (2000 * ms, frame(40000, 8080, SYN, 1000)),   # sent again after the RST: same ISN
    (2012 * ms, frame(40000, 8080, FIN_ACK, 1001)),
    (2020 * ms, frame(40000, 8080, SYN, 777777)), # a new connection on the port
    (2030 * ms, frame(40001, 8080, SYN, 5)),      # another port
]:
    hit = w.see(pkt, False, at)
    if hit and hit[2] == "hit":
        seen.append(at // ms)
want = [0, 2020, 2030]
print("counted at (ms):", seen)
sys.exit(0 if seen == want else 1)
PY
echo "ok"
