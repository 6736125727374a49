#!/usr/bin/env bash
# Non-blocking connects: the first connect() of a socket takes its place in the
# queue; calling connect() again while it is under way (EALREADY) or done (EISCONN)
# takes none, as without the shim.  A datagram socket's connect is never held.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/n.ini" <<EOF
[once]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF
LD_PRELOAD="$PRELOAD" SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/n.ini" python3 - "$PORT" <<'EOF' || fail "repeated connect took a second place"
import errno, select, socket, sys
port = int(sys.argv[1])
s = socket.socket()
s.setblocking(False)
codes = [s.connect_ex(("127.0.0.1", port))]
codes.append(s.connect_ex(("127.0.0.1", port)))   # EALREADY, or EISCONN if quick
select.select([], [s], [], 5)
codes.append(s.connect_ex(("127.0.0.1", port)))   # EISCONN
names = [errno.errorcode.get(c, str(c)) for c in codes]
print("  connect_ex results:", names)
ok = names[0] in ("EINPROGRESS", "0") and names[1] in ("EALREADY", "EISCONN", "EINPROGRESS", "0") and names[2] == "EISCONN"
s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", port)); u.connect(("127.0.0.1", port))   # UDP: never held
u.close()
# The one place is spent: a new TCP connection is refused.
t = socket.socket()
try:
    t.connect(("127.0.0.1", port)); ok = False; print("  a second connection went through")
except ConnectionRefusedError:
    pass
sys.exit(0 if ok else 1)
EOF
