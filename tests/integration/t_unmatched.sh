#!/usr/bin/env bash
# tier: parallel
# (b) A destination no section matches is not held, and the shim adds no system call
# to its connect: strace counts the same calls with and without the shim.
. "$(dirname "$0")/lib.sh"

start_server
other=$((PORT == 65535 ? PORT - 1 : PORT + 1))
write_config "$T/b.ini" <<EOF
[elsewhere]
match = 127.0.0.1:$other, 192.0.2.0/24, *.example.com
rate = 1/s
EOF

start=$(now_ms)
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/b.ini" -- bash -c '
	for i in $(seq 20); do
		curl -sS --max-time 20 -o /dev/null "http://127.0.0.1:$1/u$i" || exit 1
	done
	python3 "$2/fetch.py" "http://127.0.0.1:$1/py" 10
' _ "$PORT" "$HELPERS" || fail "client failed"
elapsed=$(($(now_ms) - start))
note "30 unmatched connections in ${elapsed} ms"
[ "$(wc -l <"$SERVER_LOG")" -eq 30 ] || fail "server saw $(wc -l <"$SERVER_LOG") requests"
# Held at 1/s they would take 29 s; unheld they take well under 10 even on a slow box.
[ "$elapsed" -lt 10000 ] || fail "unmatched connections took $elapsed ms: were they held?"
! grep -q ": go" "$T/shim.log" || fail "the shim held an unmatched connection: $(grep -m1 ': go' "$T/shim.log")"

# No extra system call on the unmatched path: 50 more connects cost exactly as many
# system calls with the shim as without it.
loop="$BUILD_DIR/bench/connect_loop"
command -v strace >/dev/null || fail "strace is missing (scripts/deps.sh installs it)"
[ -x "$loop" ] || fail "$loop is missing (make test builds it)"
{
	calls() { # N ENV... -> system calls made by N connect+close
		local n=$1
		shift
		# (`make asan`: LeakSanitizer cannot run under ptrace, and the shim is preloaded
		# ahead of the ASan runtime of connect_loop.)
		ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 strace -f -c -o "$T/strace.out" env "$@" "$loop" 127.0.0.1 "$PORT" "$n" >/dev/null 2>&1 ||
			fail "connect_loop failed"
		awk '$NF == "total" { print $4 }' "$T/strace.out"
	}
	shim=(LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/b.ini" SLUICE_SEGMENT=none)
	plain50=$(calls 50) plain100=$(calls 100)
	shim50=$(calls 50 "${shim[@]}") shim100=$(calls 100 "${shim[@]}")
	note "system calls, 50 and 100 connect+close: $plain50, $plain100 without the shim; $shim50, $shim100 with it"
	[ $((shim100 - shim50)) -eq $((plain100 - plain50)) ] ||
		fail "50 connects cost $((shim100 - shim50)) calls with the shim, $((plain100 - plain50)) without"
}

# A matched destination whose slot is always free: the admission itself (match,
# reserve, release, the connect made inside its release) makes no system call of
# its own - no signal-mask change around the segment lock (the shim defers the
# program's handlers instead: src/shim/signals.c), no futex when uncontended.
# The connect hook still looks at the socket (TCP_INFO, F_GETFL) and makes a
# blocking connect non-blocking inside its release; those are counted and shown.
write_config "$T/m.ini" <<EOF2
[open]
match = 127.0.0.1:$other
rate = 1000000000/s
burst = 1000000000
EOF2
{
	count() { # N SYSCALL -> how many times N matched connects called it
		ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 strace -f -c -o "$T/strace.m" env \
			LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/m.ini" SLUICE_SEGMENT=none \
			"$loop" 127.0.0.1 "$other" "$1" refused >/dev/null 2>&1 || echo "failed"
		awk -v c="$2" '$NF == c { n = $4 } END { print n + 0 }' "$T/strace.m"
	}
	for sc in rt_sigprocmask futex; do
		a=$(count 50 $sc) b=$(count 100 $sc)
		[ "$a" != failed ] && [ "$b" != failed ] || fail "connect_loop (matched) failed"
		[ "$a" -eq "$b" ] || fail "50 more matched connects made $((b - a)) more $sc calls"
	done
	extra=""
	for sc in getsockopt fcntl; do
		extra="$extra $(( ($(count 100 $sc) - $(count 50 $sc)) / 50 )) $sc"
	done
	note "a matched connect: no rt_sigprocmask, no futex; per connect the hook adds$extra"
}
