#!/usr/bin/env bash
# tier: serial
# The kicker's scheduling (docs/shaping.md "Event loops", docs/design.md "Deferred connects
# on time"): where the process may have it, the shim's own thread that makes
# deferred connects at their instants runs SCHED_FIFO at priority 1; it stays an
# ordinary thread when the process may not (no CAP_SYS_NICE, RLIMIT_RTPRIO 0),
# when RLIMIT_RTTIME is finite (a realtime thread running that long unblocked
# would get SIGXCPU), and with SLUICE_REALTIME=0.  In every case the program runs
# to its end and the destination sees its connects at the rate.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root: it compares a process that may be realtime with one that may not"
start_server
write_config "$T/k.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF
start_daemon "$T/k.ini"
start_witness syn "$PORT" "$T/arrivals"

# Three non-blocking connects, two of them deferred; while they wait, the kicker's
# policy and priority as /proc says them (fields 41 and 40 of its stat).
cat >"$T/probe.py" <<'EOF'
import os, select, socket, sys, time
port = int(sys.argv[1])
socks = []
for _ in range(3):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    socks.append(s)
kicker = None
for _ in range(100):
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/comm" % tid) as f:
            if f.read().strip() == "sluice-kicker":
                with open("/proc/self/task/%s/stat" % tid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                kicker = (int(fields[38]), int(fields[37]))  # policy, rt_priority
    if kicker:
        break
    time.sleep(0.01)
p = select.poll()
for s in socks:
    p.register(s, select.POLLOUT)
left, deadline = len(socks), time.monotonic() + 10
while left and time.monotonic() < deadline:
    for fd, ev in p.poll(1000):
        p.unregister(fd)
        left -= 1
assert left == 0, "%d connects never completed" % left
for s in socks:
    assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
print("policy %d priority %d" % kicker if kicker else "no kicker")
EOF

# probe NAME [WRAPPER...]: the probe under the shim, its answer in $T/NAME.out.
probe() {
	local name=$1
	shift
	: >"$T/arrivals"
	"$@" env LD_PRELOAD="$SHIM" SLUICE_CONFIG="$T/k.ini" python3 "$T/probe.py" "$PORT" >"$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "$name: the program failed"; }
	witnessed "$T/arrivals" --interval-ms 200 --expect 3 --what "$name: connects" || fail "$name: spacing"
}

probe root
grep -qx "policy 1 priority 1" "$T/root.out" || fail "a process that may be realtime: the kicker is not SCHED_FIFO 1: $(cat "$T/root.out")"

SLUICE_REALTIME=0 probe optout
grep -qx "policy 0 priority 0" "$T/optout.out" || fail "SLUICE_REALTIME=0: the kicker is $(cat "$T/optout.out")"

probe nocap setpriv --bounding-set -sys_nice --inh-caps -sys_nice
grep -qx "policy 0 priority 0" "$T/nocap.out" || fail "without CAP_SYS_NICE or RLIMIT_RTPRIO: the kicker is $(cat "$T/nocap.out")"

probe rttime prlimit --rttime=200000 --
grep -qx "policy 0 priority 0" "$T/rttime.out" || fail "with RLIMIT_RTTIME finite: the kicker is $(cat "$T/rttime.out")"
echo "ok"
