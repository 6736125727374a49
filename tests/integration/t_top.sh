#!/usr/bin/env bash
# tier: parallel
# sluice top (docs/operations.md "Running it on a machine"), driven in tmux as a person would:
# a section shaped to 10/s under load shows about 10/s achieved and its queue; a
# keyed section shows its busiest keys; `r` sorts by refusals, `q` quits; with
# stdout not a terminal, it prints a plain table each interval.
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || fail "tmux is missing (scripts/deps.sh installs it)"
start_server --also 127.0.1.1 --also 127.0.1.2
write_config "$T/top.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m

[hosts]
match = 127.0.1.0/24:$PORT
per = address
rate = 100/s
EOF
start_daemon "$T/top.ini"
# Load: three processes connecting to [slow] as fast as let (10/s in all), and
# some connects to two keys of [hosts], for 8 s.
"$SLUICE" run -c "$T/top.ini" -- python3 - "$PORT" <<'PY' >"$T/load.out" 2>&1 &
import multiprocessing, socket, sys, time
port = int(sys.argv[1])
def load(addr, n):
    end = time.monotonic() + 8
    while time.monotonic() < end and n:
        socket.create_connection((addr, port), timeout=30).close()
        n -= 1
ps = [multiprocessing.Process(target=load, args=("127.0.0.1", 1000)) for _ in range(3)]
ps += [multiprocessing.Process(target=load, args=("127.0.1.%d" % k, 5 * k)) for k in (1, 2)]
for p in ps: p.start()
for p in ps: p.join()
PY
load=$!
BG_PIDS+=($load)
session="sluicetop$$"
tmux new-session -d -s "$session" -x 160 -y 40 "env TERM=xterm-256color '$SLUICE' top -c '$T/top.ini'" ||
	fail "tmux would not start"
cleanup_tmux() { tmux kill-session -t "$session" 2>/dev/null; }
trap 'cleanup_tmux; cleanup' EXIT
sleep 3.5
tmux capture-pane -t "$session" -p >"$T/screen1.txt"
cat "$T/screen1.txt"
grep -q "^sluice top - segment $SEG, 2 sections, sorted by name" "$T/screen1.txt" || fail "no header: $(head -1 "$T/screen1.txt")"
achieved=$(awk '$1 == "slow" { sub("/s", "", $3); print $3 }' "$T/screen1.txt")
awk -v a="$achieved" 'BEGIN { exit !(a >= 7 && a <= 13) }' || fail "slow achieved '$achieved'/s, not about 10/s"
awk '$1 == "slow" { exit !($4 >= 1) }' "$T/screen1.txt" || fail "slow's queue is not shown"
grep -q "^  key 127.0.1.2 " "$T/screen1.txt" || fail "the busiest keys are not shown"
tmux send-keys -t "$session" r
sleep 0.5
tmux capture-pane -t "$session" -p >"$T/screen2.txt"
grep -q "sorted by refused" "$T/screen2.txt" || { cat "$T/screen2.txt"; fail "r did not sort by refusals"; }
tmux send-keys -t "$session" q
for _ in $(seq 30); do tmux has-session -t "$session" 2>/dev/null || break; sleep 0.1; done
tmux has-session -t "$session" 2>/dev/null && fail "q did not quit"
# Not a terminal: plain tables, one an interval.
"$SLUICE" top -c "$T/top.ini" --count 2 --interval 0.3 | cat >"$T/plain.txt"
[ "$(grep -c '^sluice top - segment' "$T/plain.txt")" -eq 2 ] || { cat "$T/plain.txt"; fail "not two plain tables"; }
grep -q $'\033' "$T/plain.txt" && fail "escape sequences in the plain table"
wait "$load" || fail "the load failed: $(cat "$T/load.out")"
echo "ok"
