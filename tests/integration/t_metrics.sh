#!/usr/bin/env bash
# tier: parallel
# Metrics (docs/operations.md "Running it on a machine"): sluiced serves Prometheus text on
# `metrics = 127.0.0.1:PORT`.  Scraped with curl and checked as a scraper reads
# the format (helpers/prom_check.py: names, types, labels, histograms); the
# counters move with traffic; a keyed section with 12 keys shows at most 10 key
# series (the busiest); `sluice stat --prometheus` prints the same format from the segment.
# And the daemon's log: refusals in one line per section every 10 s, with a count.
. "$(dirname "$0")/lib.sh"

start_server $(for i in $(seq 12); do printf -- '--also 127.0.1.%d ' "$i"; done)
mport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "$T/m.ini" <<EOF
metrics = 127.0.0.1:$mport

[api]
match = 127.0.0.1:$PORT
rate = 20/s
max_wait = 1m

[strict]
match = 127.0.0.5:$PORT
rate = 1/m
max_wait = 0

[per-host]
match = 127.0.1.0/24:$PORT
per = address
rate = 1000/s
EOF
start_daemon "$T/m.ini"
scrape() { curl -sS --max-time 5 "http://127.0.0.1:$mport/metrics" >"$1" || fail "cannot scrape the metrics"; }
metrics_show() { python3 "$HELPERS/prom_check.py" "$@" || { head -40 "$1"; fail "metrics: $*"; }; }

scrape "$T/before.txt"
metrics_show "$T/before.txt" --expect 'sluice_admitted_total{section="api"}=0' --expect 'sluice_daemon_up=1' \
	--expect 'sluice_rate_per_second{section="api"}=20' \
	--expect 'sluice_section_info{section="api",meter="connections",strategy="leaky-bucket"}=1' \
	--expect 'sluice_refused_total{section="api"}=0'
grep -q '^sluice_build_info{version="'"$(cat "$ROOT/VERSION")"'"} 1$' "$T/before.txt" ||
	fail "no sluice_build_info with this version: $(grep build_info "$T/before.txt")"
curl -sS -D - -o /dev/null "http://127.0.0.1:$mport/metrics" | grep -qi '^content-type: text/plain; version=0.0.4' ||
	fail "not served as Prometheus text 0.0.4"

# Traffic: 8 connects to api (held at 20/s); 30 to per-host over 12 addresses,
# each its own key (the first six get 3, the others 2).
"$SLUICE" run -c "$T/m.ini" -- python3 - "$PORT" <<'PY' || fail "the clients failed"
import socket, sys
port = int(sys.argv[1])
for i in range(8):
    socket.create_connection(("127.0.0.1", port), timeout=30).close()
for i in range(8):
    try:  # [strict] lets the first go (nothing listens there) and refuses 7
        socket.create_connection(("127.0.0.5", port), timeout=30).close()
    except ConnectionRefusedError:
        pass
for i in range(30):
    socket.create_connection(("127.0.1.%d" % (1 + i % 12), port), timeout=30).close()
PY
scrape "$T/after.txt"
metrics_show "$T/after.txt" --expect 'sluice_admitted_total{section="api"}=8' --expect 'sluice_held_total{section="api"}>5' \
	--expect 'sluice_wait_seconds_count{section="api"}=8' --expect 'sluice_admitted_total{section="per-host"}=30' \
	--expect 'sluice_key_admitted_total{section="per-host",key="127.0.1.1"}=3' \
	--max-series sluice_key_admitted_total=10
"$SLUICE" stat --prometheus -c "$T/m.ini" >"$T/stat.txt" || fail "stat --prometheus"
metrics_show "$T/stat.txt" --expect 'sluice_admitted_total{section="api"}=8' --expect 'sluice_refused_total{section="strict"}=7'
for _ in $(seq 60); do # the refusals' line comes within 10 s of them
	grep -q "\[strict\]: 7 refused in the last 10 s" "$T/sluiced.log" && break
	sleep 0.25
done
grep -q "\[strict\]: 7 refused in the last 10 s" "$T/sluiced.log" || { cat "$T/sluiced.log"; fail "no refusal count logged"; }
[ "$(grep -c "refused in the last" "$T/sluiced.log")" -eq 1 ] || fail "refusals logged more than once"
echo "ok"
