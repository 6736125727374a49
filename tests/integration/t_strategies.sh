#!/usr/bin/env bash
# tier: parallel
# The window strategies through the shim, with bursts of real python3 urllib
# clients, checked strictly on the SYNs' kernel times at the destination
# (helpers/windows.py):
#  - fixed-window refills at its UTC-aligned boundary, never more than AMOUNT in one;
#  - sliding-window never lets more than AMOUNT into any span of the window;
#  - session-window opens a window at its first request;
#  - layered sections (10/s leaky-bucket + a fixed window) hold to both;
#  - a request refused by one layer (its window is full for longer than max_wait) is
#    refused at once and consumes nothing in the other;
#  - mode = observe counts what would wait and holds nothing.
. "$(dirname "$0")/lib.sh"

start_server
start_witness syn "$PORT" "$T/arrivals"
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
burst() { # CONFIG N: N concurrent fetches, each on its own connection
	"$SLUICE" run -c "$1" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT" 1 "$2" 2>"$T/fetch.err" ||
		fail "fetches under $1: $(head -3 "$T/fetch.err")"
}

# window_case KIND AMOUNT WINDOW_S N: one section of KIND-window at AMOUNT/WINDOW_S,
# a burst of N, releases checked by windows.py; its summary is left in $out.
window_case() {
	write_config "$T/$1.ini" <<EOF
[$1]
match = 127.0.0.1:$PORT
rate = $2/$3s
strategy = $1-window
max_wait = 1m
EOF
	: >"$T/shim.log"
	: >"$T/arrivals"
	burst "$T/$1.ini" "$4"
	sleep 0.3
	out=$(python3 "$HELPERS/windows.py" "$T/arrivals" --strategy "$1" --amount "$2" \
		--window-ms $(($3 * 1000)) --expect "$4") || fail "$1-window: $out"
	echo "  $out"
}

# 10 at once through 4 per window: at least three windows, so it did hold.
window_case fixed 4 2 10
[ "$(echo "$out" | tr -cd ',' | wc -c)" -ge 2 ] || fail "fixed-window held nothing: $out"

window_case sliding 4 1 10
python3 - "$T/arrivals" <<'EOF' || fail "sliding-window let 10 through too fast"
import sys
rel = sorted(int(line.split()[0]) for line in open(sys.argv[1]) if line.strip())
span = (rel[-1] - rel[0]) / 1e6
print("  sliding: 10 releases over %.0f ms" % span)
sys.exit(0 if span >= 2000 else 1)   # 4 + 4 + 2: two whole windows at least
EOF

window_case session 3 1 7
[ "$(echo "$out" | tr -cd ',' | wc -c)" -ge 2 ] || fail "session-window held nothing: $out"
: >"$T/shim.log"

# Layers: 10/s spacing and 3 per 2 s window, together.
write_config "$T/layers.ini" <<EOF
[spacing]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m

[window]
match = 127.0.0.1:$PORT
rate = 3/2s
strategy = fixed-window
max_wait = 1m
EOF
: >"$T/arrivals"
burst "$T/layers.ini" 6
witnessed "$T/arrivals" --interval-ms 100 --expect 6 --what "layered connects" || fail "layers: spacing"
out=$(python3 "$HELPERS/windows.py" "$T/arrivals" --strategy fixed --amount 3 --window-ms 2000 --expect 6) ||
	fail "layers: window: $out"
echo "  layers: $out"
: >"$T/shim.log"

# A refusal by one layer consumes nothing in the other; observe holds nothing.
write_config "$T/refuse.ini" <<EOF
[spacing]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m

[cap]
match = 127.0.0.1:$PORT
rate = 2/1h
strategy = fixed-window
max_wait = 10s

[watch]
match = 127.0.0.1:$PORT
rate = 1/1h
strategy = sliding-window
mode = observe
EOF
start_daemon "$T/refuse.ini"
start=$(now_ms)
"$SLUICE" run -c "$T/refuse.ini" -- sh -c '
	for i in 1 2; do curl -sS -o /dev/null "http://127.0.0.1:$1/ok$i" || exit 1; done
	curl -sS -o /dev/null "http://127.0.0.1:$1/no" 2>/dev/null && exit 2
	exit 0' _ "$PORT" || fail "layers with a refusal: exit $?"
elapsed=$(($(now_ms) - start))
[ "$elapsed" -lt 5000 ] || fail "the refusal was not at once ($elapsed ms)"
"$SLUICE" stat -c "$T/refuse.ini" --json >"$T/stat.json" || fail "stat"
[ "$(json_field "$T/stat.json" spacing admitted)" -eq 2 ] || fail "spacing admitted $(json_field "$T/stat.json" spacing admitted)"
[ "$(json_field "$T/stat.json" cap refused)" -eq 1 ] || fail "cap refused $(json_field "$T/stat.json" cap refused)"
[ "$(json_field "$T/stat.json" spacing queued)" -eq 0 ] || fail "the refused request queued in spacing"
[ "$(json_field "$T/stat.json" watch observed)" -ge 1 ] || fail "observe counted nothing"
[ "$(json_field "$T/stat.json" watch strategy)" = "sliding-window" ] || fail "stat strategy"
# The refused one consumed nothing in [spacing]: its next slot is one interval
# after the second request, not two.
python3 - "$T/stat.json" "$T/shim.log" <<'EOF' || fail "the refusal consumed a place in [spacing]"
import json, re, sys, time
tat = [s for s in json.load(open(sys.argv[1]))["sections"] if s["name"] == "spacing"][0]["tat_ns"]
rel = sorted(int(m.group(1)) for m in re.finditer(r"slot=(\d+)", open(sys.argv[2]).read()))
print("  spacing: next slot %.1f ms after the last release" % ((tat - rel[-1]) / 1e6))
sys.exit(0 if tat - rel[-1] <= 200_000_000 + 1_000_000 else 1)
EOF
echo "ok"
