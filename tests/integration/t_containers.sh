#!/usr/bin/env bash
# tier: parallel
# One limit for every container on a host (docs/containers.md "Containers"; docs/design.md,
# "The segment" and "Who holds what"), through real namespaces, judged by the
# destination's kernel SYN stamps.  The host runs sluiced with its sockets in
# $T/host; a "pod" is `unshare --ipc --pid --mount --fork` with /run a tmpfs of its
# own and the host's socket directory bind-mounted at /run/sluice, as
# `docker run -v /run/sluice:/run/sluice` gives a container.
#  - two pods, two shaped processes each, one host limit of 5/s: 5/s at the
#    destination, never more in any span;
#  - a loop of one-request processes (curl) in a pod: held at the rate;
#  - a pod without the mount: told on stderr, and nothing goes past the limit;
#  - the daemon in a namespace of its own (a sidecar), programs on the host;
#  - `sluice run` in a pod with no daemon: its own private segment;
#  - a user namespace whose root is nobody on the host: told what to map, and
#    shaped once the config lets that user in.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pod_lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root (namespaces)"
start_server
chmod 755 "$T"
mkdir -p "$T/host"
chmod 755 "$T/host"
host_config() { # FILE MODE: the host's config, its sockets in $T/host
	cat >"$1" <<EOF
[sluice]
shm_name = /sluice
control_socket = $T/host/sluice.sock
shm_mode = $2

[api]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 30s
EOF
}
host_config "$T/host.ini" 0660
# What a container's image holds: the same limits, the socket where it mounts it.
sed "s|^control_socket = .*|control_socket = /run/sluice/sluice.sock|" "$T/host.ini" >"$T/pod.ini"
sed -i 's/^max_wait = 30s/max_wait = 1s/' "$T/pod.ini" # the unmounted pod below waits 1 s, not 30
sed "s|^max_wait = 1s|max_wait = 30s|" "$T/pod.ini" >"$T/pod-wait.ini"
chmod 644 "$T"/*.ini
SEG="$T/host/sluice.segment"

SHAPED=(env LD_PRELOAD="$PRELOAD") # a command under the shim

"$SLUICED" -f -c "$T/host.ini" 2>>"$T/sluiced.log" &
DAEMON_PID=$!
BG_PIDS+=($DAEMON_PID)
for _ in $(seq 100); do [ -S "$SEG" ] && break; sleep 0.1; done
[ -S "$SEG" ] || fail "the host's daemon serves no segment: $(cat "$T/sluiced.log")"

# --- two pods, two processes each, one limit ---
start_syn_witness "$PORT" "$T/syns.pods"
for p in 1 2; do
	pod "$T/host" "${SHAPED[@]}" SLUICE_CONFIG="$T/pod-wait.ini" bash -c '
		python3 "$1" "$2/p'$p'a" 6 & python3 "$1" "$2/p'$p'b" 6; wait $! ' sh "$HELPERS/fetch.py" \
		"http://127.0.0.1:$PORT" 2>"$T/pod$p.err" &
	eval "POD$p=\$!"
done
wait "$POD1" || fail "pod 1's clients failed: $(cat "$T/pod1.err")"
wait "$POD2" || fail "pod 2's clients failed: $(cat "$T/pod2.err")"
witnessed "$T/syns.pods" --interval-ms 200 --expect 24 --what "connects from two pods" ||
	fail "two pods together went past 5/s"
note "two pods x two processes: one queue at the destination"

# --- one request per process, in a pod ---
kill "$WITNESS_PID"
start_syn_witness "$PORT" "$T/syns.curl"
pod "$T/host" "${SHAPED[@]}" SLUICE_CONFIG="$T/pod-wait.ini" bash -c \
	'for i in $(seq 10); do curl -s -o /dev/null --max-time 30 "$1/c$i" || exit 1; done' sh \
	"http://127.0.0.1:$PORT" || fail "the curl loop in a pod failed"
witnessed "$T/syns.curl" --interval-ms 200 --expect 10 --what "curl, one process a request, in a pod" ||
	fail "a loop of curl in a pod went past 5/s"

# --- a pod without the mount: told, and never past the limit ---
kill "$WITNESS_PID"
start_syn_witness "$PORT" "$T/syns.bare"
pod --no-mount "$T/host" "${SHAPED[@]}" SLUICE_CONFIG="$T/pod.ini" bash -c \
	'for i in $(seq 3); do curl -s -o /dev/null --max-time 30 "$1/b$i"; done; true' sh \
	"http://127.0.0.1:$PORT" 2>"$T/bare.err" || fail "the unmounted pod's loop failed"
sleep 0.3
grep -q "^sluice: cannot use the shared queues at /run/sluice/sluice.segment: no such socket: no sluiced runs, or (in a container) its directory is not mounted here; calls to shaped destinations wait for it (up to max_wait) and are refused after$" \
	"$T/bare.err" || fail "the unmounted pod was not told: $(cat "$T/bare.err")"
[ ! -s "$T/syns.bare" ] || fail "a connect of the unmounted pod went unshaped: $(wc -l <"$T/syns.bare")"
note "a pod without the mount: told on stderr, its 3 calls refused after max_wait, none unshaped"

# `sluice stat` in a pod says which segment a program there would use.
pod "$T/host" "$SLUICE" stat -c "$T/pod.ini" >"$T/pod-stat.out" 2>"$T/pod-stat.err" || fail "stat in a pod: $(cat "$T/pod-stat.err")"
grep -q "^segment: /run/sluice/sluice.segment (id [0-9a-f]*, [0-9]* processes attached), the running daemon's$" \
	"$T/pod-stat.out" || fail "stat in a pod: $(head -3 "$T/pod-stat.out")"
pod --no-mount "$T/host" "$SLUICE" stat -c "$T/pod.ini" >"$T/bare-stat.out" 2>&1
grep -q "^segment: none reachable at /run/sluice/sluice.segment (no such socket): programs started here wait" \
	"$T/bare-stat.out" || fail "stat in an unmounted pod: $(head -3 "$T/bare-stat.out")"
# `sluice segments` in a pod lists the host's segment through the mount, marked as
# the one a program there would use, kept by the host's daemon's keeper - whose
# pids, the host's, are marked as another namespace's.
pod "$T/host" "$SLUICE" segments -c "$T/pod.ini" >"$T/pod-segments.out" 2>&1 || fail "segments in a pod: $(cat "$T/pod-segments.out")"
grep -qE "^\* /run/sluice/sluice.segment +[0-9]+\^ .* +[0-9]+s +$DAEMON_PID\^ +/sluice +$T/host.ini$" "$T/pod-segments.out" &&
	grep -qF "(* the one a program started here would use: /run/sluice/sluice.segment)" "$T/pod-segments.out" &&
	grep -qF "(^ a pid in the keeper's pid namespace" "$T/pod-segments.out" ||
	fail "segments in a pod: $(cat "$T/pod-segments.out")"

# --- the daemon in a namespace of its own (a sidecar), programs on the host ---
kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
python3 "$HELPERS/segment.py" remove "$SEG"
unshare --ipc --pid --mount --fork --mount-proc --kill-child -- "$SLUICED" -f -c "$T/host.ini" 2>>"$T/sluiced.log" &
SIDECAR=$!
BG_PIDS+=($SIDECAR)
for _ in $(seq 100); do [ -S "$SEG" ] && break; sleep 0.1; done
kill "$WITNESS_PID"
start_syn_witness "$PORT" "$T/syns.side"
"${SHAPED[@]}" SLUICE_CONFIG="$T/host.ini" python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/side" 5 2 ||
	fail "host clients of a sidecar daemon failed"
witnessed "$T/syns.side" --interval-ms 200 --expect 10 --what "host programs, sidecar daemon" ||
	fail "the sidecar's limit did not hold for the host's programs"
# The host's programs, invisible in the sidecar's pid namespace, are watched all
# the same (SO_PEERPIDFD): the roster holds only the daemon once they are gone.
sleep 0.3
attached=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.value(segment.ask(sys.argv[1], "info")[0], "attached"))' "$SEG")
[ "$attached" = 1 ] || fail "the sidecar's keeper kept $attached registrations of host programs that exited"
pkill -TERM -P "$SIDECAR" # its daemon (unshare itself waits on, ignoring TERM)
wait "$SIDECAR" 2>/dev/null
python3 "$HELPERS/segment.py" remove "$SEG"
rm -f "$SEG" "$T/host/sluice.sock"

# --- sluice run in a pod with no daemon at all ---
kill "$WITNESS_PID"
start_syn_witness "$PORT" "$T/syns.run"
pod --no-mount "$T/host" "$SLUICE" run -q -c "$T/pod-wait.ini" -- bash -c \
	'for i in $(seq 6); do curl -s -o /dev/null --max-time 30 "$1/r$i" || exit 1; done' sh \
	"http://127.0.0.1:$PORT" || fail "sluice run in a pod with no daemon failed"
witnessed "$T/syns.run" --interval-ms 200 --expect 6 --what "sluice run, no daemon, in a pod" ||
	fail "sluice run's own segment did not hold the limit in a pod"

# --- a user namespace: root inside is nobody outside ---
"$SLUICED" -f -c "$T/host.ini" 2>>"$T/sluiced.log" &
DAEMON_PID=$!
BG_PIDS+=($DAEMON_PID)
for _ in $(seq 100); do [ -S "$SEG" ] && break; sleep 0.1; done
kill "$WITNESS_PID"
start_syn_witness "$PORT" "$T/syns.userns"
userns() { setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user --map-root-user -- "$@"; }
userns env LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/pod.ini" SLUICE_SEGMENT="$SEG" \
	curl -s -o /dev/null --max-time 30 "http://127.0.0.1:$PORT/u" 2>"$T/userns.err"
sleep 0.3
grep -q "cannot use the shared queues at $SEG: Permission denied (uid 0 here is uid 65534 outside this user namespace)" \
	"$T/userns.err" || fail "the user namespace was not told what it is outside: $(cat "$T/userns.err")"
[ ! -s "$T/syns.userns" ] || fail "a connect from the user namespace went unshaped"
# Let that user in (others may use the segment): shaped with everyone else.
kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
python3 "$HELPERS/segment.py" remove "$SEG"
host_config "$T/host.ini" 0666
"$SLUICED" -f -c "$T/host.ini" 2>>"$T/sluiced.log" &
DAEMON_PID=$!
BG_PIDS+=($DAEMON_PID)
for _ in $(seq 100); do [ -S "$SEG" ] && break; sleep 0.1; done
userns env LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/pod.ini" SLUICE_SEGMENT="$SEG" bash -c \
	'for i in $(seq 5); do curl -s -o /dev/null --max-time 30 "$1/v$i" || exit 1; done' sh \
	"http://127.0.0.1:$PORT" 2>"$T/userns2.err" || fail "the user namespace's curls failed: $(cat "$T/userns2.err")"
witnessed "$T/syns.userns" --interval-ms 200 --expect 5 --what "curl in a user namespace, let in" ||
	fail "the user namespace let in was not shaped"
echo "ok"
