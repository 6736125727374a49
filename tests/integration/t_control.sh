#!/usr/bin/env bash
# tier: parallel
# The control socket under stress (F8): SIGTERM and control requests landing in the
# same loop iteration never crash the daemon (it stops serving control clients
# before it detaches the segment), and a client that connects and never sends is
# dropped after a timeout rather than held for ever.
. "$(dirname "$0")/lib.sh"

write_config "$T/c.ini" <<EOF
[api]
match = 192.0.2.1
rate = 10/s
EOF

# 1. 12 rounds: a burst of stat requests in flight, then SIGTERM.  Exit 0, always.
for round in $(seq 12); do
	"$SLUICED" -f -c "$T/c.ini" 2>>"$T/sluiced.log" &
	pid=$!
	for _ in $(seq 100); do
		"$SLUICE" stat -c "$T/c.ini" >/dev/null 2>&1 && break
		sleep 0.05
	done
	python3 - "$CTL" "$pid" <<'EOF'
import os, signal, socket, sys
path, pid = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(20):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    socks.append(s)
for s in socks:
    s.send(b"stat json\n")
os.kill(pid, signal.SIGTERM)   # lands with the requests still unread
for s in socks:
    s.settimeout(5)
    try:
        s.recv(65536)
    except OSError:
        pass
EOF
	wait "$pid"
	rc=$?
	[ $rc -eq 0 ] || { tail -5 "$T/sluiced.log"; fail "round $round: sluiced exited $rc on SIGTERM with requests in flight"; }
done
note "12 SIGTERMs with 20 control requests in flight: sluiced exited cleanly each time"

# 2. A silent client is dropped; the daemon keeps answering others meanwhile.
start_daemon "$T/c.ini"
python3 - "$CTL" "$SLUICE" "$T/c.ini" <<'EOF' || fail "silent control client"
import socket, subprocess, sys, time
path, sluice, cfg = sys.argv[1:4]
silent = socket.socket(socket.AF_UNIX)
silent.connect(path)
t0 = time.monotonic()
out = subprocess.run([sluice, "stat", "-c", cfg], capture_output=True, text=True, timeout=5)
assert out.returncode == 0 and "api" in out.stdout, out
silent.settimeout(10)
assert silent.recv(10) == b"", "the daemon answered a client that sent nothing"
waited = time.monotonic() - t0
print("  a client that never sent was dropped after %.1f s" % waited)
assert 1.0 < waited < 6.0, waited
EOF
kill -0 "$DAEMON_PID" || fail "sluiced died"
echo "ok"
