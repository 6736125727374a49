#!/usr/bin/env bash
# tier: check
# Bad sockaddrs and fds reach connect() through the shim exactly as they would reach
# libc: same return value and errno as without the shim, and no crash.  Driven from
# python3 ctypes, which calls the exported connect symbol like any C program.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/s.ini" <<EOF
[all]
match = *
rate = 1/s
EOF
cat >"$T/probe.py" <<'EOF'
import ctypes, ctypes.util, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
port = int(sys.argv[1])

def call(fd, buf, length):
    ctypes.set_errno(0)
    rc = libc.connect(fd, buf, length)
    return "%d/%s" % (rc, os.strerror(ctypes.get_errno()) if rc else "-")

sin = struct.pack("!HH4s8x", socket.AF_INET, port, socket.inet_aton("127.0.0.1"))
sin = struct.pack("=H", socket.AF_INET) + sin[2:]  # sa_family is host order
sin6 = struct.pack("=H", socket.AF_INET6) + struct.pack("!HI16sI", port, 0, socket.inet_pton(socket.AF_INET6, "::1"), 0)
unix = struct.pack("=H", socket.AF_UNIX) + b"/nonexistent\0"

def fresh(family=socket.AF_INET, kind=socket.SOCK_STREAM):
    return socket.socket(family, kind).detach()

results = []
results.append(call(fresh(), None, 16))                       # NULL address
results.append(call(fresh(), sin, 0))                         # zero length
results.append(call(fresh(), sin, 4))                         # short IPv4
results.append(call(fresh(socket.AF_INET6), sin6, 20))        # short IPv6
results.append(call(fresh(), unix, len(unix)))                # wrong family for the socket
results.append(call(fresh(), b"\xff\xff" + sin[2:], 16))      # unknown family
results.append(call(-1, sin, 16))                             # bad fd
results.append(call(987654, sin, 16))                         # fd not open
results.append(call(os.open("/dev/null", os.O_RDONLY), sin, 16))  # not a socket
results.append(call(fresh(socket.AF_INET, socket.SOCK_DGRAM), sin, 16))  # datagram: passes
print("\n".join(results))
EOF
python3 "$T/probe.py" "$PORT" >"$T/plain.out" || fail "probe failed without the shim"
SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none SLUICE_CONFIG="$T/s.ini" \
	python3 "$T/probe.py" "$PORT" >"$T/shim.out" 2>"$T/shim.err" || fail "probe crashed under the shim: $(tail -3 "$T/shim.err")"
diff -u "$T/plain.out" "$T/shim.out" || fail "the shim changed what connect returns for bad input"
note "$(tr '\n' ' ' <"$T/shim.out")"
