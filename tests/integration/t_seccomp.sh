#!/usr/bin/env bash
# tier: serial
# sluice run --seccomp: programs no preload reaches, held at connect() by a
# seccomp supervisor against the same queues as the shim (docs/programs.md, "What reaches
# what").  Judged at the destination (kernel SYN and datagram times):
#   - a static busybox wget and a static Go client (4 goroutines), 10 connections
#     at 5/s each, chosen by themselves (said on stderr);
#   - a static C client with 10 threads, and one that forks 3 children;
#   - a static client and a shimmed curl sharing one queue through a daemon;
#   - a dynamic program under --seccomp held once, not twice (the shim marks its
#     decided calls and the filter lets them by);
#   - datagrams by sendto and sendmsg when a section meters them;
#   - a name in the config matches a static program's connects to its addresses;
#   - concurrency = 2 shared by a static client and a shimmed python3: never more
#     than 2 open at once (places follow the connection through sock_diag);
#   - a refused connect fails with the section's errno, a held one to a closed
#     port with the kernel's ECONNREFUSED; unmatched destinations and addresses the
#     supervisor cannot read pass untouched; --no-seccomp holds nothing;
#   - a child the command leaves behind stays held, and sluice run waits for it;
#   - the exit status passes through; the supervisor killed -9 mid-run takes the
#     program down within a bound rather than leave it hanging.
. "$(dirname "$0")/lib.sh"

SC="$BUILD_DIR/tests/static_client"
GO="$BUILD_DIR/tests/goclient"
BUSYBOX=/bin/busybox
for p in "$SC" "$GO" "$BUSYBOX"; do
	[ -x "$p" ] || fail "$p is missing (make test builds the clients; scripts/deps.sh installs busybox-static and golang-go)"
done
file -L "$BUSYBOX" | grep -q "statically linked" || fail "$BUSYBOX is not the static busybox (busybox-static)"

start_server
write_config "$T/s.ini" <<EOF
[static]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF
start_witness syn "$PORT" "$T/syn"
spaced() { # WHAT COUNT: COUNT connections at the destination, 200 ms apart
	witnessed "$T/syn" --interval-ms 200 --expect "$2" --what "$1" || fail "$1: spacing"
	: >"$T/syn"
}

# --- busybox wget (static), chosen by itself ---
"$SLUICE" run -c "$T/s.ini" -- "$BUSYBOX" sh -c \
	"for i in 1 2 3 4 5 6 7 8 9 10; do $BUSYBOX wget -q -O /dev/null http://127.0.0.1:$PORT/bb\$i || exit 1; done" \
	2>"$T/bb.err" || fail "busybox wget under sluice run: $(cat "$T/bb.err")"
grep -q "is statically linked: its connects are held through seccomp" "$T/bb.err" ||
	fail "sluice run did not say it chose seccomp: $(cat "$T/bb.err")"
spaced "busybox wget (static)" 10

# --- Go (static, CGO_ENABLED=0), 4 goroutines ---
out=$("$SLUICE" run -c "$T/s.ini" -- "$GO" "http://127.0.0.1:$PORT/go" 10 4 2>"$T/go.err") ||
	fail "Go client: $out $(cat "$T/go.err")"
[ "$out" = "done 10 0" ] || fail "Go client: $out"
grep -q "is a Go program" "$T/go.err" || fail "sluice run did not tell a Go program: $(cat "$T/go.err")"
spaced "Go, 4 goroutines" 10

# --- static C: 10 threads; 3 forked children ---
out=$("$SLUICE" run -c "$T/s.ini" -- "$SC" http "$PORT" 10 10 2>/dev/null) || fail "10 threads: $out"
[ "$out" = "done 10 0" ] || fail "10 threads: $out"
spaced "static C, 10 threads" 10
out=$("$SLUICE" run -c "$T/s.ini" -- "$SC" fork "$PORT" 6 3 2>/dev/null) || fail "3 children: $out"
[ "$out" = "done 6 0" ] || fail "3 children: $out"
spaced "static C, 3 forked children" 6

# --- one queue with a shimmed curl, through a daemon ---
start_daemon "$T/s.ini"
"$SLUICE" run -c "$T/s.ini" -- "$SC" http "$PORT" 8 2 >"$T/share-sc.out" 2>&1 &
sc=$!
"$SLUICE" run -c "$T/s.ini" -- sh -c \
	'for i in 1 2 3 4 5 6 7 8; do curl -sS -o /dev/null "http://127.0.0.1:$1/curl$i" || exit 1; done' _ "$PORT" ||
	fail "curl beside the static client"
wait $sc || fail "the static client beside curl: $(cat "$T/share-sc.out")"
spaced "static C and curl sharing one queue" 16
[ "$("$SLUICE" stat -c "$T/s.ini" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["sections"][0]["admitted"])')" -ge 16 ] ||
	fail "the daemon's queue did not count both programs"
stop_daemon

# --- a dynamic program under --seccomp: held by the shim, once ---
start=$(now_ms)
"$SLUICE" run -v --seccomp -c "$T/s.ini" -- sh -c \
	'for i in 1 2 3 4 5 6; do curl -sS -o /dev/null "http://127.0.0.1:$1/once$i" || exit 1; done' _ "$PORT" \
	2>"$T/once.err" || fail "curl under --seccomp: $(cat "$T/once.err")"
took=$(($(now_ms) - start))
spaced "curl under --seccomp" 6
[ "$(grep -c "sections=static: go" "$T/once.err")" -eq 6 ] || fail "the shim did not hold curl's 6 connects"
grep -q "seccomp connect 127.0.0.1:$PORT" "$T/once.err" && fail "curl's connects were held twice: $(cat "$T/once.err")"
note "6 curl connects at 5/s under --seccomp took $took ms (twice held would take 2 s)"

# --- datagrams ---
start_helper uport "$T/udp.port" "UDP sink" python3 "$HELPERS/udp_sink.py" --port-file "$T/udp.port" --log "$T/udp.log"
write_config "$T/u.ini" <<EOF
[datagrams]
match = 127.0.0.1:$uport
meter = datagrams
rate = 10/s
max_wait = 1m
EOF
start_witness datagram "$uport" "$T/dgrams"
out=$("$SLUICE" run -c "$T/u.ini" -- "$SC" udp "$uport" 5 2>/dev/null) || fail "datagrams: $out"
[ "$out" = "done 10 0" ] || fail "datagrams: $out"
witnessed "$T/dgrams" --interval-ms 100 --expect 10 --what "datagrams by sendto and sendmsg" || fail "datagrams: spacing"
kill "$WITNESS_PID"

# --- a name in the config: resolved by the supervisor ---
write_config "$T/n.ini" <<EOF
[by-name]
match = localhost:$PORT
rate = 5/s
max_wait = 1m
EOF
# (the names resolved again every 0.2 s meanwhile, on their own thread)
out=$(SLUICE_NAMES_REFRESH_S=0.2 "$SLUICE" run -v -c "$T/n.ini" -- "$SC" http "$PORT" 8 2 2>"$T/name.err") ||
	fail "by name: $out"
[ "$(grep -c "seccomp connect 127.0.0.1:$PORT (localhost): go" "$T/name.err")" -eq 8 ] ||
	fail "the config's name did not match every connect: $(cat "$T/name.err")"
spaced "static C to a name of the config" 8

# --- refusals: max_wait = 0 with its errno; a concurrency section ---
write_config "$T/r.ini" <<EOF
[refusing]
match = 127.0.0.1:$PORT
rate = 1/s
max_wait = 0
refuse = EHOSTUNREACH
EOF
out=$("$SLUICE" run -c "$T/r.ini" -- "$SC" http "$PORT" 3 1 2>/dev/null)
[ "$out" = "done 1 2 EHOSTUNREACH" ] || fail "refused connects: $out (want 1 through, 2 EHOSTUNREACH)"
: >"$T/syn"

# --- concurrency: places taken before the connect, given back when the program
# has closed it (sock_diag), shared with a shimmed python3 ---
start_helper hport "$T/hold.port" "hold server" python3 "$HELPERS/sink.py" "$T/hold.port" 240 hold
write_config "$T/c.ini" <<EOF
[two]
match = 127.0.0.1:$hport
concurrency = 2
max_wait = 1m
EOF
start_daemon "$T/c.ini"
"$SLUICE" run -c "$T/c.ini" -- "$SC" hold "$hport" 6 3 300 >"$T/static.iv" 2>/dev/null &
sc=$!
"$SLUICE" run -c "$T/c.ini" -- python3 -c '
import os, socket, sys, threading, time
def one():
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
    a = time.monotonic_ns()
    time.sleep(0.3)
    b = time.monotonic_ns()
    s.close()
    os.write(1, b"%d %d\n" % (a, b))  # one write: print() from threads mixes lines
ts = [threading.Thread(target=one) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()' "$hport" >"$T/python.iv" || fail "python3 beside the static client"
wait $sc || fail "the static client holding places: $(cat "$T/static.iv")"
grep -q "^done 6 0$" "$T/static.iv" || fail "the static client's connections: $(tail -1 "$T/static.iv")"
grep -h '^[0-9]' "$T/static.iv" "$T/python.iv" |
	python3 "$HELPERS/overlap.py" 2 --count 10 --what "connections (static and shimmed)" ||
	fail "concurrency under seccomp: more than 2 open at once"
stop_daemon

# --- a held connect made by the supervisor fails as the kernel fails it ---
write_config "$T/closed.ini" <<EOF
[closed-port]
match = 127.0.0.1:1
rate = 5/s
EOF
out=$("$SLUICE" run -c "$T/closed.ini" -- "$SC" http 1 2 1 2>/dev/null)
[ "$out" = "done 0 2 ECONNREFUSED" ] || fail "a connect to a closed port under seccomp: $out"

# --- passed untouched: unmatched, unreadable, short, AF_UNIX; --no-seccomp ---
write_config "$T/o.ini" <<EOF
[elsewhere]
match = 127.0.0.1:1
rate = 1/s
EOF
start=$(now_ms)
out=$("$SLUICE" run -c "$T/o.ini" -- "$SC" http "$PORT" 10 2 2>/dev/null) || fail "unmatched: $out"
[ "$out" = "done 10 0" ] && [ $(($(now_ms) - start)) -lt 1500 ] || fail "unmatched connects were held: $out"
"$SLUICE" run -c "$T/s.ini" -- "$SC" odd "$PORT" >"$T/odd.out" 2>&1 ||
	fail "odd addresses were not failed as the kernel fails them: $(cat "$T/odd.out")"
start=$(now_ms)
out=$("$SLUICE" run --no-seccomp -c "$T/s.ini" -- "$SC" http "$PORT" 6 1 2>/dev/null) || fail "--no-seccomp: $out"
[ $(($(now_ms) - start)) -lt 800 ] || fail "--no-seccomp held a static program"
: >"$T/syn"

# --- a child left behind (a program that daemonizes): still held, and sluice run
# waits for it, then exits with the command's status ---
start=$(now_ms)
"$SLUICE" run -c "$T/s.ini" -- "$BUSYBOX" sh -c \
	"(sleep 0.5; for i in 1 2 3; do $BUSYBOX wget -q -O /dev/null http://127.0.0.1:$PORT/left\$i || echo FAILED; done) & exit 5" \
	>"$T/left.out" 2>/dev/null
rc=$?
[ $rc -eq 5 ] || fail "with a child left behind, sluice run exited $rc, not the command's 5"
[ $(($(now_ms) - start)) -ge 800 ] || fail "sluice run did not wait for the child left behind"
grep -q FAILED "$T/left.out" && fail "the child left behind could not connect"
spaced "a child left behind" 3

# --- the exit status; the supervisor killed -9 ---
"$SLUICE" run -c "$T/s.ini" -- "$BUSYBOX" sh -c 'exit 7' 2>/dev/null
[ $? -eq 7 ] || fail "the exit status did not pass through"
"$SLUICE" run -c "$T/s.ini" -- "$SC" http "$PORT" 40 4 >/dev/null 2>&1 &
sup=$!
for _ in $(seq 50); do
	client=$(pgrep -P "$sup" -f static_client) && break
	sleep 0.1
done
[ -n "$client" ] || fail "the static client did not start"
sleep 1
kill -9 "$sup"
gone=0
for _ in $(seq 50); do # 5 s at most
	state=$(awk '{print $3}' "/proc/$client/stat" 2>/dev/null)
	if [ -z "$state" ] || [ "$state" = Z ]; then
		gone=1
		break
	fi
	sleep 0.1
done
[ $gone -eq 1 ] || fail "the program outlived its killed supervisor by 5 s (state $state)"
wait "$sup" 2>/dev/null
echo "ok"
