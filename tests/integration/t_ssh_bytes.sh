#!/usr/bin/env bash
# tier: serial
# meter = bytes for writers that come late for their pieces (issue 48, item 8):
# git push and rsync over ssh, whose event loop spends milliseconds between its
# poll and its write while it fills its buffers, and a writer that comes 8 ms
# late for every piece it waited for.  At 1 MiB/s, judged at the destination
# (every payload segment's kernel time): never more than the rate and one piece
# in any second or since the first byte (strict), every byte there, and the
# upload at no less than a floor of the rate - the late writer got 76% before a
# late write could carry what its lateness earned (docs/design.md, "Bytes") - and
# a sender stopped and let go on a loaded machine kept to the same bound.
# The figures against their targets (>= 99%) are make bench's (bench/clients.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ssh_lib.sh"
start_sshd

start_helper PORT "$T/port" "receiver" \
	python3 "$HELPERS/stall_reader.py" --port-file "$T/port" --after $((1 << 40)) --pause 0
write_config "$T/b.ini" <<EOF2
[ssh]
match = 127.0.0.1:$SSHD_PORT
meter = bytes
rate = 1M/s
max_wait = 1m

[upload]
match = 127.0.0.1:$PORT
meter = bytes
rate = 1M/s
max_wait = 1m
EOF2
start_witness bytes "$SSHD_PORT" "$T/ssh.arrivals"
start_witness bytes "$PORT" "$T/late.arrivals"
N=$((4 * 1024 * 1024))
# judged FILE FLOOR WHAT: a piece is 20 ms of the rate (sl_bytes_piece: 20,971
# bytes); 5 ms of slack for the witness's own jitter, as t_bytes_drain allows.
judged() {
	sleep 0.3
	out=$(python3 "$HELPERS/bytes_check.py" "$1" --rate $((1024 * 1024)) --piece 20971 \
		--span 1 --slack-ms 5 --expect-bytes "$N" --floor "$2") || fail "$3: $out"
	note "$3: $(echo "$out" | tr "\n" " ")"
	: >"$1"
}

git init -q --bare "$T/remote.git"
git init -q "$T/work"
head -c "$N" /dev/urandom >"$T/work/blob.bin"
git -C "$T/work" add blob.bin
git -C "$T/work" -c user.name=t -c user.email=t@t commit -q -m blob
GIT_SSH_COMMAND="$SSH_CMD" "$SLUICE" run -q -c "$T/b.ini" -- \
	git -C "$T/work" push -q "ssh://root@127.0.0.1:$SSHD_PORT$T/remote.git" HEAD:refs/heads/main ||
	fail "git push over ssh"
[ "$(git -C "$T/remote.git" rev-parse main)" = "$(git -C "$T/work" rev-parse HEAD)" ] || fail "git push: not there"
judged "$T/ssh.arrivals" 90 "git push of 4 MiB over ssh"

head -c "$N" /dev/urandom >"$T/r.bin"
"$SLUICE" run -q -c "$T/b.ini" -- rsync -e "$SSH_CMD" "$T/r.bin" "root@127.0.0.1:$T/r.copy" || fail "rsync over ssh"
cmp -s "$T/r.bin" "$T/r.copy" || fail "rsync: the copy differs"
judged "$T/ssh.arrivals" 90 "rsync of 4 MiB over ssh"

"$SLUICE" run -q -c "$T/b.ini" -- python3 "$HELPERS/late_writer.py" "$PORT" "$N" --late-ms 8 --every 1 ||
	fail "late writer"
judged "$T/late.arrivals" 88 "a writer 8 ms late for every piece"

# A sender stopped for 60 ms at a time on a loaded machine (two busy loops) and
# then let go: what it missed is not made up in a burst - never more than the
# rate and one piece in a second (the issue saw rate + 28,836 bytes once, at load
# 5.7).  The floor is low: the stops themselves are time the upload cannot use.
head -c "$N" /dev/urandom >"$T/up.bin"
for _ in 1 2; do
	(end=$((SECONDS + 8)); while [ "$SECONDS" -lt "$end" ]; do :; done) &
	BG_PIDS+=($!)
done
"$SLUICE" run -q -c "$T/b.ini" -- curl -sS -T "$T/up.bin" "http://127.0.0.1:$PORT/stopped" >"$T/curl.out" &
runner=$!
sleep 0.5
for _ in 1 2 3 4 5; do
	pkill -STOP -P "$runner"
	sleep 0.06
	pkill -CONT -P "$runner"
	sleep 0.5
done
wait "$runner" || fail "curl -T with stops"
grep -q "got $N bytes" "$T/curl.out" || fail "curl -T with stops: $(cat "$T/curl.out")"
judged "$T/late.arrivals" 70 "curl -T stopped 60 ms five times, under load"
echo "ok"
