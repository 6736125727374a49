#!/usr/bin/env bash
# tier: parallel
# The transparency matrix (helpers/matrix.py): every real client - curl, wget,
# python3 urllib, requests, aiohttp, httpx, node fetch and http, git over git://
# and smart HTTP, openssl s_client, socat UDP, redis-cli, perl LWP, ruby net/http,
# php, smtplib - run unshaped and under the shim at 5/s against real local
# servers: output identical, as many connections (or datagrams, or requests), and
# the rate kept at the destination on kernel timestamps.  A second pass holds
# requests on kept-alive connections (meter = requests), where non-blocking
# clients get EAGAIN on held writes.  The table it prints is docs/programs.md's list of
# tested programs; this test also checks that docs/programs.md names every one.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 "$HELPERS/matrix.py" "$SLUICE" "$T" "$BUILD_DIR/matrix.md" || fail "transparency matrix"
python3 - "$BUILD_DIR/matrix.md" "$ROOT/docs/programs.md" <<'EOF' || fail "docs/programs.md's tested programs"
import sys
rows = [l.split("|")[1].strip() for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| program")]
readme = open(sys.argv[2]).read()
section = readme.split("## Tested programs", 1)[-1].split("\n## ", 1)[0] if "## Tested programs" in readme else ""
missing = sorted(set(r for r in rows if "| %s |" % r not in section))
if missing:
    sys.exit("docs/programs.md's 'Tested programs' table lacks: " + ", ".join(missing))
EOF
echo "ok"
