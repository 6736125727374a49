# Shared helpers for the integration tests; sourced by each t_*.sh.
# Every test runs in its own temporary directory with its own segment and control
# socket names, talks only to servers it starts on loopback, and cleans up on exit.
set -u
# The programs the tests run are the Debian packages scripts/deps.sh installs: a
# python3 of a version manager earlier in PATH (pyenv's shim) has none of their
# modules and takes half a second to start, which turns timing bounds into
# measures of the shim script.
export PATH="/usr/bin:/bin:/usr/sbin:/sbin${PATH:+:$PATH}"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=$(cd "$ROOT/${BUILD:-build}" && pwd)
SLUICE="$BUILD_DIR/sluice"
SLUICED="$BUILD_DIR/sluiced"
SHIM="$BUILD_DIR/libsluice.so"
export HELPERS="$ROOT/tests/integration/helpers"
export SLUICE_LIB="$SHIM"

T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-test.XXXXXX")
# Every file a test writes goes under $T: with it empty they would land in / (as
# stray m1.ini and offer-*.out files once did).
if [ -z "$T" ] || [ ! -d "$T" ]; then
	echo "FAIL: no temporary directory (mktemp: ${TMPDIR:-/tmp})"
	exit 1
fi
SHM_NAME="/sluice-test-$$-$RANDOM"
CTL="$T/ctl.sock"
# The segment's socket, beside the control socket (src/core/segsock.c): what a
# program's shim asks for the segment, and what SLUICE_SEGMENT names.
SEG="$T/${SHM_NAME#/}.segment"
BG_PIDS=()

cleanup() {
	local p
	# The test has said all it has to; the shell's "Killed" notices of the
	# helpers stopped here are not part of it.
	exec 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill -9 "$p"; done
	# Pods this test made (pod_lib.sh): their unshare, started from a background
	# subshell, is not in BG_PIDS; killed, it kills the pod (--kill-child).
	pkill -9 -f -- "--kill-child -- .*$T/" 2>/dev/null
	wait
	# A faketime wrapper killed so cannot remove the shared memory it keeps,
	# named by its pid.
	for p in "${BG_PIDS[@]}"; do rm -f "/dev/shm/faketime_shm_$p" "/dev/shm/sem.faketime_sem_$p"; done
	# Every segment a daemon of this test left with a keeper (they outlive their
	# daemons by design: docs/containers.md "Containers").
	find "$T" -name '*.segment' -type s 2>/dev/null | while read -r p; do
		python3 "$HELPERS/segment.py" remove "$p"
	done
	if [ -n "${KEEP:-}" ]; then
		echo "kept $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}

note() {
	echo "  $*"
}

# start_helper VAR PORTFILE WHAT CMD...: run a local helper in the background that
# writes its port to PORTFILE; wait for it (10 s at most) and set VAR to the port.
start_helper() {
	local var=$1 pf=$2 what=$3
	shift 3
	"$@" &
	BG_PIDS+=($!)
	for _ in $(seq 100); do
		[ -s "$pf" ] && break
		sleep 0.1
	done
	[ -s "$pf" ] || fail "$what did not start"
	printf -v "$var" '%s' "$(cat "$pf")"
}

# start_server [--ipv6]: a local HTTP receiver; sets PORT and SERVER_LOG.
start_server() {
	local pf="$T/port.$RANDOM"
	SERVER_LOG="$T/server.log"
	start_helper PORT "$pf" server \
		python3 "$HELPERS/server.py" --port-file "$pf" --log "$SERVER_LOG" --lifetime 240 "$@"
}

# start_syn_witness PORT FILE: kernel timestamps of every SYN to PORT on loopback,
# appended to FILE (helpers/syn_witness.py): the destination's own record of when
# connections were attempted.  Sets WITNESS_PID (stop it before reusing FILE).
# WITNESS_NETNS and WITNESS_IF watch another interface inside a network namespace
# the caller made (make bench's veth rows).
start_syn_witness() {
	local ready="$T/witness.$RANDOM"
	${WITNESS_NETNS:+ip netns exec "$WITNESS_NETNS"} python3 "$HELPERS/syn_witness.py" --port "$1" --out "$2" \
		--ready-file "$ready" --lifetime 240 --what "${WITNESS_WHAT:-syn}" ${WITNESS_DST:+--dst "$WITNESS_DST"} \
		${WITNESS_KEY:+--key "$WITNESS_KEY"} ${WITNESS_IF:+--interface "$WITNESS_IF"} &
	WITNESS_PID=$!
	BG_PIDS+=($!)
	for _ in $(seq 100); do
		[ -s "$ready" ] && return 0
		sleep 0.1
	done
	fail "SYN witness did not start (it needs root for a packet socket)"
}

# start_witness WHAT PORT FILE: as start_syn_witness, recording WHAT: syn, first
# (each connection's first payload), request (each request's first segment, as the
# server receives it), datagram or bytes.  WITNESS_DST=ADDR: only packets to ADDR.
# WITNESS_KEY=host|dst: each line also says the request's Host, or its destination.
start_witness() {
	local what=$1
	shift
	WITNESS_WHAT=$what start_syn_witness "$@"
}

# witnessed FILE ARGS...: once the last packets are in, hold FILE's arrivals to
# the rate's promise (helpers/arrivals.py ARGS).  This is what spacing assertions
# read: the destination's kernel times, never the shim's own log, which stays for
# diagnostics.  The witness goes on; `: >FILE` starts the next count afresh.
witnessed() {
	local file=$1
	shift
	sleep 0.3
	python3 "$HELPERS/arrivals.py" "$file" "$@"
}

# expect_spaced FILE MS COUNT WHAT: COUNT arrivals in FILE (the destination's kernel
# times), none closer than MS apart, or the test fails; FILE is emptied for the
# next part.  Tests assert one way: a condition `|| fail WHY`, or a helper such as
# this one that says what it saw and fails by itself.
expect_spaced() {
	witnessed "$1" --interval-ms "$2" --expect "$3" --what "$4" || fail "$4: spacing"
	: >"$1"
}

# write_config FILE: the [sluice] section for this test, then stdin's sections.
write_config() {
	{
		printf '[sluice]\nshm_name = %s\ncontrol_socket = %s\n\n' "$SHM_NAME" "$CTL"
		cat
	} >"$1"
}

# start_daemon CONFIG: sluiced in the foreground, in the background; sets DAEMON_PID.
start_daemon() {
	"$SLUICED" -f -c "$1" 2>>"$T/sluiced.log" &
	DAEMON_PID=$!
	BG_PIDS+=($DAEMON_PID)
	# Ready when the daemon itself answers: `sluice stat` also succeeds by reading
	# a segment left behind, and a killed daemon leaves its socket file.
	for _ in $(seq 100); do
		if "$SLUICE" stat -c "$1" >/dev/null 2>"$T/stat.err" && ! grep -q "no daemon answers" "$T/stat.err"; then
			return 0
		fi
		sleep 0.1
	done
	cat "$T/sluiced.log"
	fail "sluiced did not start"
}

# stop_daemon: SIGTERM to the daemon start_daemon started, and wait for it.
stop_daemon() {
	kill "$DAEMON_PID" 2>/dev/null
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
}

# json_field JSON_FILE SECTION FIELD
json_field() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if sys.argv[2] == "-":
    print(d[sys.argv[3]])
else:
    print([s for s in d["sections"] if s["name"] == sys.argv[2]][0][sys.argv[3]])
' "$@"
}

# alive PID: the process runs (a zombie does not: killed, not yet reaped).
alive() {
	ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}
PRELOAD="$SHIM"
