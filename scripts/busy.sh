#!/usr/bin/env bash
# busy.sh N CMD...: run CMD while N busy loops compete for the cores, as a
# machine doing other work would (make test-busy: the tests must pass there too,
# issue 22's "two busy loops").  Each loop is an ordinary process at nice 0 and
# ends by itself after two hours, or when CMD ends, whichever comes first.
set -u
n=${1:?usage: busy.sh N CMD...}
shift
pids=()
for _ in $(seq "$n"); do
	timeout 7200 sh -c 'while :; do :; done' &
	pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT INT TERM
echo "busy.sh: $n busy loops running beside: $*"
"$@"
