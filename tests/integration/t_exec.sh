#!/usr/bin/env bash
# tier: parallel
# The shim goes on into children exec'd with an environment that lacks it:
# env -i (execvp with an empty environ, then sh's own execve), python3 subprocess
# with env={} (execve from a vfork child) and os.posix_spawn with an empty
# environment.  Each child is curl, whose requests must be held at the configured
# spacing.  A program's own LD_PRELOAD keeps its libraries with the shim after
# them; its own SLUICE_* settings win.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/e.ini" <<EOF
[web]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
connects_spaced() { # NAME COUNT: connections spaced at the destination, the right count
	expect_spaced "$T/arrivals" 100 "$2" "$1 connects"
}
start_witness syn "$PORT" "$T/arrivals"
run() { "$SLUICE" run -c "$T/e.ini" -- "$@"; }

# env -i: execvp with an empty environ; then sh's own execve of curl.
run env -i /bin/sh -c 'for i in 1 2 3; do
	[ "$(/usr/bin/curl -sS "http://127.0.0.1:$1/e$i")" = "hello /e$i" ] || exit 1
done' _ "$PORT" || fail "env -i"
connects_spaced "env -i" 3

# python3 subprocess, env={}: _posixsubprocess's execve, in a vfork child.
run python3 -c '
import subprocess, sys
for i in range(3):
    out = subprocess.run(["/usr/bin/curl", "-sS", "http://127.0.0.1:%s/s%d" % (sys.argv[1], i)],
                         env={}, capture_output=True, check=True).stdout
    assert out == b"hello /s%d\n" % i, out
' "$PORT" || fail "python3 subprocess env={}"
connects_spaced "subprocess env={}" 3

# os.posix_spawn with an empty environment.
run python3 -c '
import os, sys
for i in range(3):
    pid = os.posix_spawn("/usr/bin/curl", ["curl", "-sS", "-o", "/dev/null",
                         "http://127.0.0.1:%s/p%d" % (sys.argv[1], i)], {})
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
' "$PORT" || fail "posix_spawn"
connects_spaced "posix_spawn" 3

# A program's own LD_PRELOAD is kept, the shim appended; its own SLUICE_* kept.
got=$(run env -i LD_PRELOAD=libm.so.6 SLUICE_FALLBACK=open /bin/sh -c 'echo "$LD_PRELOAD|$SLUICE_FALLBACK|${SLUICE_CONFIG:-}"')
case "$got" in
libm.so.6:*libsluice*.so"|open|$T/e.ini") ;;
*) fail "environment given to the child: $got" ;;
esac
# And one already naming the shim is left alone.
got=$(run env -i "LD_PRELOAD=$SHIM" /bin/sh -c 'echo "$LD_PRELOAD"')
[ "$got" = "$SHIM" ] || fail "LD_PRELOAD naming the shim was changed: $got"
echo "ok"
