#!/usr/bin/env bash
# tier: check
# `sluice stat` with no config finds what this user can see (issue 51): where no
# config is installed (/etc/sluice/sluice.ini) it shows the machine's segment if
# a daemon serves one, else a running `sluice run`'s own segment, and says which
# on stderr - it used to answer "/etc/sluice/sluice.ini: cannot read" (exit 2)
# while a one-liner ran.  `sluice segments` marks a run's own segment, whose
# config names another (stat -c on it read /sluice-cli-N), and says how to show
# it; with no config it lists without an error about the missing file.
. "$(dirname "$0")/lib.sh"

# As on a machine with nothing installed: where this one has a config or a
# daemon's socket directory, an empty one is mounted over it for the commands.
bare() {
	local m=""
	[ -d /etc/sluice ] && m="$m mount -t tmpfs none /etc/sluice &&"
	[ -d /run/sluice ] && m="$m mount -t tmpfs none /run/sluice &&"
	if [ -n "$m" ]; then
		unshare -m sh -c "$m exec \"\$@\"" _ "$@"
	else
		"$@"
	fi
}

# This test's own run directory: the `sluice run`s of tests running beside it
# (tests/run.sh) are this user's too, and stat would find theirs.
export XDG_RUNTIME_DIR="$T/xdg"
mkdir -m 0700 "$XDG_RUNTIME_DIR" || fail "mkdir $XDG_RUNTIME_DIR"

start_server
bare env -u SLUICE_CONFIG "$SLUICE" stat >"$T/none.out" 2>"$T/none.err" && fail "stat with nothing to show exited 0"
grep -q "no config at /etc/sluice/sluice.ini, no daemon's segment at .* and no \`sluice run\` of this user's running" \
	"$T/none.err" || fail "stat with nothing to show did not say so: $(cat "$T/none.err")"
grep -q "cannot read" "$T/none.err" && fail "stat still says the file it was never asked for cannot be read"

bare env -u SLUICE_CONFIG "$SLUICE" run -q --match "127.0.0.1:$PORT" --rate 1/s -- sleep 20 &
run=$!
BG_PIDS+=("$run")
# The run's segment is hosted by the command's child: its line is the one whose
# keeper is that child.
line=""
for _ in $(seq 50); do
	bare env -u SLUICE_CONFIG "$SLUICE" segments >"$T/seg.out" 2>"$T/seg.err"
	for child in $(pgrep -P "$run"); do
		line=$(awk -v k="$child" '($1 == k || $2 == k || $3 == k) && /sluice-run-/' "$T/seg.out")
		[ -n "$line" ] && BG_PIDS+=("$child") && break 2
	done
	sleep 0.1
done
[ -n "$line" ] || fail "segments does not list the run's segment: $(cat "$T/seg.out")"
echo "$line" | grep -q "(+)$" || fail "segments does not mark the run's own segment: $line"
grep -q "^(+ a \`sluice run\`'s own segment, not the one its config names: \`sluice stat --segment SOCKET\` shows it" \
	"$T/seg.out" || fail "segments does not say how to show a run's segment: $(cat "$T/seg.out")"
[ -s "$T/seg.err" ] && fail "segments with no config said: $(cat "$T/seg.err")"
sock=$(echo "$line" | awk '{ print ($1 == "*" ? $2 : $1) }')
name=$(echo "$line" | grep -o "/sluice-run-[0-9]* ")
[ -n "$sock" ] || fail "no socket for the run's segment in: $(cat "$T/seg.out")"

bare env -u SLUICE_CONFIG "$SLUICE" stat >"$T/run.out" 2>"$T/run.err" || fail "stat with a run going: $(cat "$T/run.err")"
grep -qF "showing the segment of a running \`sluice run\` at $sock" "$T/run.err" ||
	fail "stat did not say which segment it shows: $(cat "$T/run.err")"
grep -q "^segment ${name}" "$T/run.out" || fail "stat did not show the run's segment: $(cat "$T/run.out")"
grep -q "match 127.0.0.1:$PORT" "$T/run.out" || fail "stat did not show the run's section: $(cat "$T/run.out")"
bare env -u SLUICE_CONFIG "$SLUICE" stat --json >"$T/run.json" 2>/dev/null || fail "stat --json with a run going"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if any(s["name"] == "cli" for s in d["sections"]) else 1)' \
	"$T/run.json" || fail "stat --json did not show the run's section: $(head -c 300 "$T/run.json")"
kill "$run" "$child" 2>/dev/null
wait "$run" 2>/dev/null
echo "ok"
