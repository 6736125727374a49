#!/usr/bin/env bash
# tier: serial
# Nothing a shim trusts may switch shaping off by being wrong (docs/operations.md "Trust"):
# clients offering 100/s keep a 50/s section's queue full while one part of the
# segment the shims trust is scribbled on.
#   - the header's summary (meters, has_names, the index's kinds, run and prefix
#     lengths, the checksum itself): a shim believes it only when its checksum
#     agrees, so shaping holds at once: the destination's whole record keeps the
#     bound;
#   - a section's in_use, serial and spec (its meter, rate, window, mode): sealed
#     the same way (each section's checksum), so a shim decides nothing on a
#     scribbled section - its calls wait, undecided - and the whole record keeps
#     the bound; the daemon writes it back at its next heartbeat, logging it;
#   - a pattern, the match index: the daemon compares them at each heartbeat
#     with what it wrote and writes them back, logging it; from that write-back
#     on, the record keeps the bound again.
# Judged by the kernel's SYN stamps at the destination.
. "$(dirname "$0")/lib.sh"

python3 "$HELPERS/sink.py" "$T/port" 200 &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
write_config "$T/s.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 50/s
max_wait = 1m

[names]
match = *.example.test
rate = 1/s
EOF
start_daemon "$T/s.ini"

# scribble WHAT: write over one trusted part of the segment.
scribble() {
	python3 - "$SEG" "$1" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
name, what = sys.argv[1], sys.argv[2]
with segment.Segment(name) as f:
    at = segment.layout(f)
    sec = at["sections"]  # section 0 is [api]: spec at +8, meter at +8+68, amount at +8+88
    header = {"meters": (348, b"\0\0\0\0"), "has_names": (60, b"\0\0\0\0"),
              "index_kinds": (384, b"\0\0\0\0"), "index_run": (388, b"\0\0\0\0"),
              "v4_lens": (392, b"\0" * 8), "summary_sum": (456, b"\x5a" * 8)}
    if what in header:
        off, data = header[what]
    elif what == "in_use":
        off, data = sec, b"\0\0\0\0"
    elif what == "meter":
        off, data = sec + 8 + 68, struct.pack("<I", 3)  # datagrams
    elif what == "amount":
        off, data = sec + 8 + 88, struct.pack("<Q", 1 << 40)
    elif what == "window":  # 4 bytes: a window of 1 ns
        off, data = sec + 8 + 96, struct.pack("<I", 1)
    elif what == "mode":  # observe: counted, never held
        off, data = sec + 8 + 76, struct.pack("<I", 1)
    elif what == "pattern":
        off, data = at["patterns"], b"\0" * 32
    elif what == "index":  # every slot in use, emptied
        f.seek(376)
        nslots = struct.unpack("<I", f.read(4))[0]
        f.seek(at["index"])
        raw = f.read(16 * nslots)
        used = [i for i in range(nslots) if struct.unpack_from("<Q", raw, 16 * i)[0]]
        assert used, "no slot in use in the index"
        for i in used:
            f.seek(at["index"] + 16 * i)
            f.write(b"\0" * 16)
        sys.exit(0)
    f.seek(off)
    f.write(data)
EOF
}

run_with() { # WHAT STRICT: clients, a scribble 0.5 s in, the record judged
	local what=$1 strict=$2 from=0 i
	: >"$T/syns"
	: >"$T/sluiced.log"
	start_syn_witness "$PORT" "$T/syns"
	# 100/s offered for 3 s from four processes, each on its own schedule: a
	# queue throughout, and were shaping off, twice the rate at the destination.
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 "$HELPERS/offer.py" 127.0.0.1 "$PORT" 100 3 \
		--procs 4 >"$T/offer.out" 2>&1 &
	local offer=$!
	sleep 0.5
	scribble "$what"
	# Judged from the write-back on (the daemon's log says when), plus 0.1 s
	# for connects a shim let go just before it: the heartbeat comes every
	# 0.5 s, later on a loaded machine.
	local repaired=0
	if [ "$strict" != strict ]; then
		for i in $(seq 300); do
			if grep -aq "was not what sluiced wrote" "$T/sluiced.log"; then
				repaired=$(date +%s%N)
				break
			fi
			sleep 0.01
		done
		[ "$repaired" -gt 0 ] || fail "$what: not written back within 3 s"
		from=$((repaired + 100000000))
	fi
	wait "$offer" || fail "$what: the clients failed: $(cat "$T/offer.out")"
	kill "$WITNESS_PID" 2>/dev/null
	wait "$WITNESS_PID" 2>/dev/null
	python3 - "$T/syns" "$from" <<'EOF' >"$T/from.syns"
import sys
for l in open(sys.argv[1]):
    if l.strip() and int(l.split()[0]) >= int(sys.argv[2]):
        print(l.strip())
EOF
	python3 "$HELPERS/arrivals.py" "$T/from.syns" --interval-ms 20 --slack-ms 0.25 --at-least 60 \
		--what "connects, $what scribbled" || fail "$what: shaping did not hold"
}

for what in meters has_names index_kinds index_run v4_lens summary_sum; do
	run_with $what strict
	note "$what: the checksum kept it from being believed"
	sleep 0.6
	grep -q "the header's summary was not what sluiced wrote" "$T/sluiced.log" ||
		fail "$what: the daemon did not write the summary back"
done
for what in in_use meter amount window mode; do
	run_with $what strict
	sleep 0.6
	grep -q "a section's spec was not what sluiced wrote (scribbled?): written back" "$T/sluiced.log" ||
		fail "$what: the daemon did not write it back: $(cat "$T/sluiced.log")"
	note "$what: the section's seal kept it from being acted on; written back by the daemon"
done
for what in pattern index; do
	run_with $what after-a-heartbeat
	grep -q "was not what sluiced wrote (scribbled?): written back" "$T/sluiced.log" ||
		fail "$what: the daemon did not write it back: $(cat "$T/sluiced.log")"
	note "$what: written back by the daemon ($(grep -o 'segment [^:]*: [^(]*' "$T/sluiced.log" | head -1))"
done
"$SLUICE" stat -c "$T/s.ini" >/dev/null || fail "stat after the scribbles"
echo "ok"
