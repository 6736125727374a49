#!/usr/bin/env bash
# tier: parallel
# No fixed cap on sections or patterns (issue 10, item 2): a config of 10,000
# sections and 100,000 patterns loads, its sections match (by index, not by a walk
# of them all), and it reloads to 12,000 sections while shaped programs run - each
# destination's spacing held at the destination across the reload, and a section
# that came with the reload shaping at once.  A reload beyond the segment's room is
# refused with a message that says what to do, and changes nothing.
. "$(dirname "$0")/lib.sh"

start_server --also 127.20.0.1 --also 127.20.20.1 --also 127.20.39.250 --also 127.20.47.250

# Section i: its own address on 127.20.0.0/16 and nine names, all on $PORT; 5/s
# each (200 ms apart).
gen() {
	python3 - "$1" "$PORT" <<'EOF'
import sys
n, port = int(sys.argv[1]), int(sys.argv[2])
out = []
for i in range(n):
    names = "\n".join("  " + " ".join("h%d-%d.many.test:%d" % (i, j, port) for j in range(k, k + 3))
                      for k in (0, 3, 6))  # three to a line: inih reads 200 bytes a line
    out.append("[s%d]\nmatch = 127.20.%d.%d:%d\n%s\nrate = 5/s\nmax_wait = 1m\n"
               % (i, i // 250, i % 250 + 1, port, names))
sys.stdout.write("\n".join(out))
EOF
}
gen 10000 | write_config "$T/many.ini"
start=$(now_ms)
start_daemon "$T/many.ini"
note "sluiced loaded 10,000 sections, 100,000 patterns in $(($(now_ms) - start)) ms"
"$SLUICE" stat -c "$T/many.ini" --json >"$T/s.json" || fail "stat of 10,000 sections"
python3 - "$T/s.json" <<'EOF' || fail "stat: not every section is there"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["sections"]) == 10000, len(d["sections"])
EOF

# Three programs, each connecting as fast as it is let to one section's address,
# for 6 s; the config is reloaded to 12,000 sections 2 s in.
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
client() { # ADDR SECONDS
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$1" "$PORT" "$2" <<'EOF'
import socket, sys, time
end, n = time.monotonic() + float(sys.argv[3]), 0
while time.monotonic() < end:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30).close()
    n += 1
print(n)
EOF
}
for a in 127.20.0.1 127.20.20.1 127.20.39.250; do
	client $a 6 >"$T/c-$a.out" 2>&1 &
	BG_PIDS+=($!)
	eval "C_${a//./_}=\$!"
done
sleep 2
gen 12000 | write_config "$T/many.ini"
start=$(now_ms)
"$SLUICE" reload -c "$T/many.ini" >"$T/reload.out" 2>&1 || fail "reload to 12,000 sections: $(cat "$T/reload.out")"
note "reloaded to 12,000 sections, 120,000 patterns in $(($(now_ms) - start)) ms, while 3 programs connected"
grep -q "reloaded .*: 12000 sections, 120000 patterns" "$T/sluiced.log" ||
	fail "the daemon did not say it reloaded: $(tail -3 "$T/sluiced.log")"
note "$(grep -o "the segment lock held [0-9.]* ms" "$T/sluiced.log" | tail -1) by the reload"
# A section that came with the reload shapes at once.
n=$(client 127.20.47.250 2) || fail "the client of a new section failed"
for a in 127.20.0.1 127.20.20.1 127.20.39.250; do
	pid=$(eval echo "\$C_${a//./_}")
	wait "$pid" || fail "the client of $a failed: $(cat "$T/c-$a.out")"
	got=$(cat "$T/c-$a.out")
	note "$a: $got connects in 6 s at 5/s"
	[ "$got" -ge 20 ] && [ "$got" -le 31 ] || fail "$a: $got connects in 6 s at 5/s"
done
[ "$n" -ge 7 ] && [ "$n" -le 11 ] || fail "the new section's client made $n connects in 2 s at 5/s"
witnessed "$T/syn.log" --interval-ms 200 --group-field 4 --groups 4 \
	--what "SYNs per section across a reload to 12,000 sections" || fail "spacing broken across the reload"

# More sections than the segment has room for (twice the first load's: 20,000):
# the reload makes a larger segment and the sections move to it.
gen 25000 | write_config "$T/many.ini"
"$SLUICE" reload -c "$T/many.ini" >"$T/big.out" 2>&1 || fail "a reload beyond the segment's room: $(cat "$T/big.out")"
grep -q "made anew for the larger config" "$T/sluiced.log" || fail "the reload did not say it made the segment anew"
"$SLUICE" stat -c "$T/many.ini" --json >"$T/s.json" || fail "stat after the larger reload"
python3 - "$T/s.json" <<'EOF' || fail "the larger reload did not load the sections"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["sections"]) == 25000, len(d["sections"])
EOF
echo "ok"
