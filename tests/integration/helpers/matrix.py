#!/usr/bin/env python3
"""The transparency matrix: every real client this machine has, run unshaped and
then under the shim at 5/s, against real local servers.

For each client: its standard output must be the same in both runs (lines that
carry the time, such as Date headers, excepted), it must succeed both times, the
destination must see as many connections (or datagrams) shaped as unshaped, and
the shaped arrivals must keep the rate: at most burst + W/interval in any span W,
checked on kernel timestamps taken at the destination (SYNs captured on the
loopback interface with SO_TIMESTAMPNS; datagrams stamped by the receiving
socket), never on the shim's own log.

Usage: matrix.py SLUICE_BINARY WORKDIR MARKDOWN_OUT
A client whose program is missing fails the run: scripts/deps.sh installs them.
Prints one line per client and a markdown table (also written to MARKDOWN_OUT).
"""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

PY = "/usr/bin/python3"  # Debian's, with the packages deps.sh installs
HERE = os.path.dirname(os.path.abspath(__file__))
INTERVAL_MS = 200.0  # 5/s
SLACK_MS = 1.0       # kernel stamps the SYN a little after the release it follows
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4


METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ")


class SynWitness(threading.Thread):
    """Kernel timestamps (CLOCK_REALTIME ns) of every SYN to the given ports, and of
    every TCP segment to them whose payload starts an HTTP request (a request
    line's method): the destination's record of connections and requests."""

    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports = set(ports)
        self.seen = []  # (ns, port, kind, sport): kind "syn" or "req"
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("lo", 0))

    def run(self):
        while True:
            frame, anc, _, addr = self.sock.recvmsg(2048, socket.CMSG_SPACE(16))
            if addr[2] == PACKET_OUTGOING or len(frame) < 14:
                continue
            etype = struct.unpack_from("!H", frame, 12)[0]
            if etype == 0x0800 and len(frame) >= 34 and frame[23] == 6:
                tcp = 14 + (frame[14] & 0x0F) * 4
            elif etype == 0x86DD and len(frame) >= 54 and frame[20] == 6:
                tcp = 54
            else:
                continue
            if len(frame) < tcp + 14:
                continue
            sport, dport = struct.unpack_from("!HH", frame, tcp)
            flags = frame[tcp + 13]
            payload = frame[tcp + (frame[tcp + 12] >> 4) * 4:]
            if dport not in self.ports:
                continue
            if flags & 0x02 and not flags & 0x10:
                kind = "syn"
            elif payload.startswith(METHODS):
                kind = "req"
            else:
                continue
            ns = next((struct.unpack_from("ll", d)[0] * 10**9 + struct.unpack_from("ll", d)[1]
                       for lvl, kind, d in anc if lvl == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS),
                      time.time_ns())
            with self.lock:
                self.seen.append((ns, dport, kind, sport))

    def between(self, ports, t0, t1, kind="syn"):
        with self.lock:
            return sorted(ns for ns, port, k, _ in self.seen
                          if port in ports and k == kind and t0 <= ns <= t1)


class UdpSink(threading.Thread):
    """Datagrams received, with the socket's kernel receive timestamps."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.got = []
        self.lock = threading.Lock()

    def run(self):
        while True:
            data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16))
            ns = next((struct.unpack_from("ll", d)[0] * 10**9 + struct.unpack_from("ll", d)[1]
                       for lvl, kind, d in anc if lvl == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS),
                      time.time_ns())
            with self.lock:
                self.got.append((ns, data))

    def between(self, t0, t1):
        with self.lock:
            return sorted(x for x in self.got if t0 <= x[0] <= t1)


def conforms(times, interval_ms, burst=1, slack_ms=SLACK_MS):
    """GCRA conformance of arrival instants: None, or what broke."""
    T, tau = interval_ms * 1e6, (burst - 1) * interval_ms * 1e6 + slack_ms * 1e6
    tat = times[0] if times else 0
    for i, t in enumerate(times):
        if t < tat - tau:
            return "arrival %d came %.3f ms early" % (i, (tat - tau - t) / 1e6)
        tat = max(t, tat) + T
    return None


def lwp(base, keep_alive):
    """perl LWP fetching three paths, with keep-alive off (a connection each) or on."""
    return ["perl", "-MLWP::UserAgent", "-e",
            "my $ua = LWP::UserAgent->new(keep_alive => %d, timeout => 10);"
            "for my $i (0..2) { my $r = $ua->get('%s/l' . $i); die unless $r->is_success; print $r->decoded_content }"
            % (keep_alive, base)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, what, limit=10):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("FAIL: %s did not start on port %d" % (what, port))


def need(*programs):
    for p in programs:
        if not shutil.which(p) and not os.path.exists(p):
            sys.exit("FAIL: %s is missing (scripts/deps.sh installs it)" % p)


VOLATILE = re.compile(r"^(Date|Server|Last-Modified):.*$", re.M)


def run_all(clients, sluice, config, work, witness, udp, kind):
    """Run each client unshaped, then under `sluice run -c config`; returns the
    table rows and how many failed."""
    rows, failed = [], 0
    for name, how, ports, cmd in clients:
        outs, counts, problem, gaps = [], [], None, None
        for shaped in (False, True):
            full = ([sluice, "run", "-c", config, "--"] + cmd) if shaped else cmd
            t0 = time.time_ns()
            try:
                r = subprocess.run(full, capture_output=True, timeout=60, cwd=work,
                                   env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
            except subprocess.TimeoutExpired:
                problem = "timed out" + (" (shaped)" if shaped else "")
                break
            time.sleep(0.3)  # the last packet reaches its witness
            t1 = time.time_ns()
            if r.returncode != 0:
                problem = "exit %d%s: %s" % (r.returncode, " (shaped)" if shaped else "",
                                              r.stderr.decode(errors="replace").strip()[-200:])
                break
            out = VOLATILE.sub("", r.stdout.decode(errors="replace"))
            if "--parallel" in cmd:  # finishes in whatever order, shaped or not
                out = "".join(sorted(out.splitlines(True)))
            outs.append(out)
            if ports == ["udp"]:
                got = udp.between(t0, t1)
                times = [ns for ns, _ in got]
                outs[-1] += "".join(sorted(d.decode(errors="replace") for _, d in got))
            else:
                times = witness.between(set(ports), t0, t1, kind)
            counts.append(len(times))
            if shaped:
                gaps = [(b - a) / 1e6 for a, b in zip(times, times[1:])]
                problem = conforms(times, INTERVAL_MS)
        if not problem and not outs[0].strip():
            problem = "no output"
        if not problem and outs[0] != outs[1]:
            problem = "output differs: %r vs %r" % (outs[0][-120:], outs[1][-120:])
        if not problem and counts[0] != counts[1]:
            problem = "%d arrivals unshaped, %d shaped" % (counts[0], counts[1])
        if not problem and counts[1] < 2:
            problem = "too few arrivals (%d) to check the rate" % counts[1]
        ok = problem is None
        failed += not ok
        line = "%-20s %-4s %s=%s min_gap=%s" % (name, "ok" if ok else "FAIL", kind, counts[-1] if counts else "-",
                                                  "%.1fms" % min(gaps) if gaps else "-")
        print(line + ("" if ok else "  " + problem), flush=True)
        rows.append((name, how, counts[-1] if counts else 0, "%.1f" % min(gaps) if gaps else "-",
                     "yes" if ok else "NO: " + problem))
    return rows, failed


def main():
    sluice, work, md_out = sys.argv[1:4]
    need("curl", "wget", "git", "openssl", "socat", "redis-server", "redis-cli", "perl", "ruby",
         "php", "node", PY)
    for mod in ("requests", "aiohttp", "httpx", "aiosmtpd"):
        if subprocess.run([PY, "-c", "import " + mod]).returncode != 0:
            sys.exit("FAIL: python3-%s is missing (scripts/deps.sh installs it)" % mod)
    procs = []

    def bg(cmd, **kw):
        # Its own process group: git daemon and redis-server fork, and all of a
        # server's processes must go when the matrix ends.
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        procs.append(p)
        return p

    def port_of(pf):
        for _ in range(100):
            if os.path.exists(pf) and open(pf).read().strip():
                return int(open(pf).read())
            time.sleep(0.1)
        sys.exit("FAIL: no port in " + pf)

    # Servers.
    bg([PY, os.path.join(HERE, "server.py"), "--port-file", work + "/http.port", "--lifetime", "600"])
    http = port_of(work + "/http.port")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-days", "1", "-keyout", work + "/key.pem", "-out", work + "/cert.pem"],
                   check=True, capture_output=True)
    bg([PY, os.path.join(HERE, "server.py"), "--port-file", work + "/https.port", "--lifetime", "600",
        "--tls", work + "/cert.pem", work + "/key.pem"])
    https = port_of(work + "/https.port")
    repo = work + "/repos/r.git"
    src = work + "/src"
    genv = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
                GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    os.makedirs(src)
    subprocess.run(["git", "init", "-q", "-b", "main", src], check=True, env=genv)
    open(src + "/f", "w").write("matrix\n")
    subprocess.run(["git", "-C", src, "add", "f"], check=True, env=genv)
    subprocess.run(["git", "-C", src, "commit", "-q", "-m", "one"], check=True, env=genv)
    subprocess.run(["git", "clone", "-q", "--bare", src, repo], check=True, env=genv)
    gitd = free_port()
    bg(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", "--port=%d" % gitd,
        "--base-path=" + work + "/repos", "--export-all", work + "/repos"])
    wait_port(gitd, "git daemon")
    bg([PY, os.path.join(HERE, "git_http.py"), work + "/repos", work + "/githttp.port"])
    githttp = port_of(work + "/githttp.port")
    redis = free_port()
    bg(["redis-server", "--port", str(redis), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--protected-mode", "yes"])
    wait_port(redis, "redis-server")
    smtp = free_port()
    bg([PY, "-m", "aiosmtpd", "-n", "-l", "127.0.0.1:%d" % smtp])
    wait_port(smtp, "aiosmtpd")
    udp = UdpSink()
    udp.start()
    witness = SynWitness([http, https, gitd, githttp, redis, smtp])
    witness.start()

    with open(work + "/m.ini", "w") as f:
        f.write("[sluice]\nshm_name = /sluice-matrix-%d\ncontrol_socket = %s/ctl.sock\n\n" % (os.getpid(), work))
        f.write("[tcp]\nmatch = %s\nrate = 5/s\nmax_wait = 1m\n\n"
                % ", ".join("127.0.0.1:%d" % p for p in (http, https, gitd, githttp, redis, smtp)))
        f.write("[udp]\nmatch = 127.0.0.1:%d\nmeter = datagrams\nrate = 5/s\nmax_wait = 1m\n" % udp.port)

    H = "http://127.0.0.1:%d" % http
    sh = lambda script: ["sh", "-c", script]
    clients = [
        ("curl", "curl, a connection each", [http],
         sh("for i in 1 2 3; do curl -sS %s/curl$i || exit 1; done" % H)),
        ("curl --parallel", "curl --parallel --parallel-immediate, 4 at once", [http],
         ["curl", "-sS", "--parallel", "--parallel-immediate"] + ["%s/par%d" % (H, i) for i in range(4)]),
        ("wget", "wget -qO-, a run each", [http],
         sh("for i in 1 2 3; do wget -qO- %s/wget$i || exit 1; done" % H)),
        ("python3 urllib", "urllib.request.urlopen", [http],
         [PY, "-c", "import urllib.request as u\nfor i in range(3): print(u.urlopen('%s/u%%d' %% i).read().decode(), end='')" % H]),
        ("python3 requests", "requests.get", [http],
         [PY, "-c", "import requests\nfor i in range(3): print(requests.get('%s/r%%d' %% i).text, end='')" % H]),
        ("python3 aiohttp", "aiohttp, 3 at once", [http],
         [PY, "-c", "import aiohttp, asyncio\nasync def one(i):\n async with aiohttp.ClientSession() as s:\n"
          "  async with s.get('%s/a%%d' %% i) as r: return await r.text()\n"
          "async def main():\n for b in await asyncio.gather(*(one(i) for i in range(3))): print(b, end='')\n"
          "asyncio.run(main())" % H]),
        ("python3 httpx", "httpx.get", [http],
         [PY, "-c", "import httpx\nfor i in range(3): print(httpx.get('%s/x%%d' %% i).text, end='')" % H]),
        ("node fetch", "fetch, 3 at once", [http],
         ["node", "-e", "Promise.all([0,1,2].map(i => fetch('%s/f' + i).then(r => r.text())))"
          ".then(b => b.forEach(x => process.stdout.write(x)))" % H]),
        ("node http", "http.get, agent: false", [http],
         ["node", "-e", "const h = require('http'); let n = 0, out = [];"
          "for (let i = 0; i < 3; i++) h.get({host: '127.0.0.1', port: %d, path: '/h' + i, agent: false}, r => {"
          "let b = ''; r.on('data', d => b += d); r.on('end', () => { out[i] = b; if (++n === 3) process.stdout.write(out.join('')); }); });"
          % http]),
        ("git (git://)", "git ls-remote over git daemon", [gitd],
         sh("for i in 1 2 3; do git ls-remote git://127.0.0.1:%d/r.git || exit 1; done" % gitd)),
        ("git (smart HTTP)", "git ls-remote and clone over git http-backend", [githttp],
         sh("git ls-remote http://127.0.0.1:%d/r.git && rm -rf %s/clone && "
            "git clone -q http://127.0.0.1:%d/r.git %s/clone && cat %s/clone/f"
            % (githttp, work, githttp, work, work))),
        ("openssl s_client", "s_client -quiet, a request each", [https],
         sh("for i in 1 2 3; do printf 'GET /o%%s HTTP/1.0\\r\\n\\r\\n' $i | "
            "openssl s_client -quiet -connect 127.0.0.1:%d 2>/dev/null | tail -1; done" % https)),
        ("socat UDP", "a datagram each, meter = datagrams", ["udp"],
         sh("for i in 1 2 3 4; do echo d$i | socat -u - UDP:127.0.0.1:%d || exit 1; done" % udp.port)),
        ("redis-cli", "redis-cli ping, a run each", [redis],
         sh("for i in 1 2 3; do redis-cli -p %d ping || exit 1; done" % redis)),
        ("perl LWP", "LWP::UserAgent, keep_alive 0", [http], lwp(H, 0)),
        ("ruby net/http", "Net::HTTP.get", [http],
         ["ruby", "-rnet/http", "-e", "3.times { |i| print Net::HTTP.get(URI('%s/rb' + i.to_s)) }" % H]),
        ("php", "file_get_contents", [http],
         ["php", "-r", "for ($i = 0; $i < 3; $i++) echo file_get_contents('%s/php' . $i);" % H]),
        ("php curl", "curl_exec (an extension opened with RTLD_DEEPBIND)", [http],
         ["php", "-r", "for ($i = 0; $i < 3; $i++) { $c = curl_init('%s/pc' . $i); "
          "curl_setopt($c, CURLOPT_RETURNTRANSFER, true); echo curl_exec($c); }" % H]),
        ("python3 smtplib", "smtplib.SMTP, a message each", [smtp],
         [PY, "-c", "import smtplib\nfor i in range(3):\n with smtplib.SMTP('127.0.0.1', %d, timeout=10) as s:\n"
          "  s.sendmail('a@example.com', ['b@example.com'], 'Subject: %%d\\r\\n\\r\\nbody\\r\\n' %% i)\n"
          "  print('sent', i)" % smtp]),
    ]
    # meter = requests: three requests on one kept-alive connection, the first
    # taken with the connect, the others held at their writes (EAGAIN where the
    # socket is non-blocking).  Witnessed as request starts at the destination.
    with open(work + "/r.ini", "w") as f:
        f.write("[sluice]\nshm_name = /sluice-matrix-r-%d\ncontrol_socket = %s/ctl-r.sock\n\n" % (os.getpid(), work))
        f.write("[requests]\nmatch = 127.0.0.1:%d\nmeter = requests\nrate = 5/s\nmax_wait = 1m\n" % http)
    keep_alive = [
        ("curl", "three URLs, one connection", [http],
         ["curl", "-sS"] + ["%s/k%d" % (H, i) for i in range(3)]),
        ("wget", "three URLs, one connection", [http],
         ["wget", "-qO-"] + ["%s/k%d" % (H, i) for i in range(3)]),
        ("python3 http.client", "HTTPConnection, three requests", [http],
         [PY, "-c", "import http.client\nc = http.client.HTTPConnection('127.0.0.1', %d)\n"
          "for i in range(3):\n c.request('GET', '/k%%d' %% i); print(c.getresponse().read().decode(), end='')" % http]),
        ("python3 requests", "requests.Session", [http],
         [PY, "-c", "import requests\ns = requests.Session()\nfor i in range(3): print(s.get('%s/k%%d' %% i).text, end='')" % H]),
        ("python3 aiohttp", "one ClientSession, in turn", [http],
         [PY, "-c", "import aiohttp, asyncio\nasync def main():\n async with aiohttp.ClientSession() as s:\n"
          "  for i in range(3):\n   async with s.get('%s/k%%d' %% i) as r: print(await r.text(), end='')\n"
          "asyncio.run(main())" % H]),
        ("python3 httpx", "httpx.Client", [http],
         [PY, "-c", "import httpx\nwith httpx.Client() as c:\n for i in range(3): print(c.get('%s/k%%d' %% i).text, end='')" % H]),
        ("node fetch", "fetch, one after another (pooled)", [http],
         ["node", "-e", "(async () => { for (let i = 0; i < 3; i++) process.stdout.write(await (await fetch('%s/k' + i)).text()); })()" % H]),
        ("node http", "http.get, keep-alive agent", [http],
         ["node", "-e", "const h = require('http'); const agent = new h.Agent({keepAlive: true, maxSockets: 1});"
          "let i = 0; const next = () => h.get({host: '127.0.0.1', port: %d, path: '/k' + i, agent}, r => {"
          "let b = ''; r.on('data', d => b += d); r.on('end', () => { process.stdout.write(b); if (++i < 3) next(); else agent.destroy(); }); });"
          "next();" % http]),
        ("perl LWP", "LWP::UserAgent, keep_alive 1", [http], lwp(H, 1)),
        ("ruby net/http", "Net::HTTP.start, three gets", [http],
         ["ruby", "-rnet/http", "-e", "Net::HTTP.start('127.0.0.1', %d) { |h| 3.times { |i| print h.get('/k' + i.to_s).body } }" % http]),
    ]
    rows, failed = run_all(clients, sluice, work + "/m.ini", work, witness, udp, "syn")
    rows2, failed2 = run_all(keep_alive, sluice, work + "/r.ini", work, witness, udp, "req")
    table = ["| program | how it was driven | arrivals shaped | smallest gap (ms) | identical and within the rate |",
             "| --- | --- | --- | --- | --- |"]
    table += ["| %s | %s | %d | %s | %s |" % r for r in rows]
    table += ["", "meter = requests, requests on one kept-alive connection (held at their writes):", "",
              "| program | how it was driven | requests shaped | smallest gap (ms) | identical and within the rate |",
              "| --- | --- | --- | --- | --- |"]
    table += ["| %s | %s | %d | %s | %s |" % r for r in rows2]
    with open(md_out, "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))
    failed += failed2
    for p in procs:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
