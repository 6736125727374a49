#!/usr/bin/env python3
"""The chaos suite: an operator's worst day, witnessed at the destination.

  chaos.py BUILD_DIR WORKDIR [--size ci|full|overload] [--keyed]

Phase 1 (the limit must hold): CLIENTS processes under the shim connect in loops
to one local sink through a daemon's segment at 50/s, and HOLDERS processes each
keep connections open a while to a second sink under `concurrency = 3`, while
this driver
  - kills clients with SIGKILL at random instants (some in their sleep, some inside
    the segment lock), reaping some of them late so they linger as zombies, and
    starts new ones in their place;
  - kills the daemon with SIGKILL and starts it again;
  - reloads between equal limits written in other windows (50/s, 3000/m, 500/10s),
    which once zeroed the state.
It asserts, on the kernel's SYN timestamps at the sink: never more than 3
connections open at once at the second sink (from each connection's SYN to its
client's FIN or RST, kernel times too), never more than
burst + W/interval in any span W (SLACK_MS of timestamping noise allowed, as in
every test); and that no client ran longer than its bound or died of a signal it
was not sent.  The connect is made inside its release's critical section, so no
preemption between the check and the SYN can bring two SYNs closer than an
interval (docs/design.md, "Where the bound is kept").

Phase 2 (nothing may crash or hang): the same clients while the segment is
scribbled on - the header, each field of its summary the shims trust, each
section's fields, the lock word and its nonce half - with random bytes.  A scribbler can loosen a limit (whoever may write the segment is trusted
that far); what must never happen is a client killed by the shim or held past its
bound.  Resizing the segment is tried too: its memfd's seals refuse it (a
truncated file once killed every attached program with SIGBUS).

With --keyed both sections are keyed (`per = address`): the one destination is
one key, and the same limits must hold through the key table, which the
scribbler then writes on too.

Prints a summary line per phase; exits 1 on any violation.
"""
import argparse
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration", "helpers"))
import segment  # noqa: E402  (the test helpers' view of the shared segment)
import syn_witness  # noqa: E402  (what the witness missed)

HERE = os.path.dirname(os.path.abspath(__file__))
HELPERS = os.path.join(HERE, "..", "integration", "helpers")
INTERVAL_MS = 20.0  # 50/s
SLACK_MS = 1.0
SIZES = {
    # clients, seconds per phase, connects per client before it exits and is replaced,
    # the sections' max_wait in seconds
    "ci": dict(clients=40, holders=6, seconds=12, connects=8, max_wait=30),
    "full": dict(clients=400, holders=40, seconds=60, connects=4, max_wait=30),
    # Overload: 2,000 processes in the queue at once on a 2-core machine (load far
    # above the core count), each waiting up to 40 s for its turn.
    "overload": dict(clients=2000, holders=60, seconds=40, connects=1, max_wait=120),
}
FORMS = ["50/s", "3000/m", "500/10s"]
CONCURRENCY = 3
HOLD = """import socket, sys, time
for i in range(4):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
    except ConnectionRefusedError:  # no place within max_wait: an answer, not a failure
        continue
    time.sleep(0.05)
    s.close()
"""


def max_open(syn_file, end_file):
    """The most connections open at once at a sink, from kernel times: each from its
    SYN to its client's FIN or RST (the first after it, by source port)."""
    events = []
    for path, kind in ((syn_file, 1), (end_file, -1)):
        with open(path) as f:
            for line in f:
                ns, _, sport = (int(x) for x in line.split())
                events.append((ns, kind, sport))
    events.sort()
    open_ports, most = set(), 0
    for ns, kind, sport in events:
        if kind == 1:
            open_ports.add(sport)
            most = max(most, len(open_ports))
        else:
            open_ports.discard(sport)
    return most


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def wait_file(path, what, limit=10):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        time.sleep(0.05)
    fail(what + " did not start")


class Chaos:
    def __init__(self, build, work, size, keyed=False):
        self.build, self.work, self.size, self.keyed = build, work, SIZES[size], keyed
        self.keys_off = 0  # the key table's offset in the segment (scribbler)
        self.shm = "/sluice-chaos-%d" % os.getpid()
        self.seg = segment.segment_path(self.work, self.shm)  # its keeper's socket
        self.config = os.path.join(work, "chaos.ini")
        self.procs = []        # {"p", "started", "killed" (by us), "reap_at"}
        self.violations = []
        self.lock = threading.Lock()
        self.daemon = None
        self.kills = self.daemon_restarts = self.reloads = self.scribbles = self.resizes = 0
        self.scribbling = False  # phase 2 under way (bound)
        self.events = []  # (CLOCK_REALTIME ns, what the operator did)

    def write_config(self, form):
        with open(self.config + ".tmp", "w") as f:
            f.write("[sluice]\nshm_name = %s\ncontrol_socket = %s/ctl.sock\n\n" % (self.shm, self.work))
            per = "per = address\n" if self.keyed else ""
            f.write("[chaos]\nmatch = 127.0.0.1:%d\nrate = %s\nmax_wait = %ds\n%s\n"
                    % (self.port, form, self.size["max_wait"], per))
            f.write("[chaos-places]\nmatch = 127.0.0.1:%d\nconcurrency = %d\nmax_wait = %ds\n%s"
                    % (self.cport, CONCURRENCY, self.size["max_wait"], per))
        os.rename(self.config + ".tmp", self.config)

    def start_daemon(self):
        log = open(os.path.join(self.work, "sluiced.log"), "a")
        self.daemon = subprocess.Popen([os.path.join(self.build, "sluiced"), "-f", "-c", self.config],
                                       stdout=log, stderr=log)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if segment.exists(self.seg) and os.path.exists(self.work + "/ctl.sock"):
                return
            time.sleep(0.05)
        fail("sluiced did not start")

    def start_client(self, kind):
        env = dict(os.environ, LD_PRELOAD=os.path.join(self.build, "libsluice.so"), SLUICE_SEGMENT=self.seg,
                   SLUICE_CONFIG=self.config)
        # "refused": a connect refused (its queue ran past max_wait, a scribbled
        # state repaired to a whole window) is an answer, not a failure; only a
        # crash, or a hang past the bound, is.
        cmd = ([os.path.join(self.build, "bench", "connect_loop"), "127.0.0.1", str(self.port),
                str(self.size["connects"]), "refused"] if kind == "rate"
               else ["/usr/bin/python3", "-c", HOLD, str(self.cport)])
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        with self.lock:
            self.procs.append({"p": p, "kind": kind, "started": time.monotonic(), "killed": False,
                               "reap_at": 0})

    def bound(self):
        """How long a client may take: each connect waits behind every other client
        at most, with a margin for a lock taken over or a daemon restart.  While the
        segment is scribbled on, twice more the sections' max_wait and its grace: a
        state scribbled to a time that looks possible (a queue that deep could be
        real) holds a connect as a real queue would - up to max_wait, then refused
        (docs/operations.md, trust model: a writer can slow others, never hang them) - and the
        state the last scribble left may still lie that far ahead when the same
        client's next connect asks, so it holds that one too.  A client held past
        this bound is a hang.  (Once max_wait and grace only: a keyed client ran
        67 s against 66 s.)"""
        bound = self.size["connects"] * (self.size["clients"] * INTERVAL_MS / 1000 + 2) + 10
        if self.scribbling:
            bound += 2 * (self.size["max_wait"] * 1.1 + 1)
        return bound

    def check_exits(self, final=False):
        """Reap what ended (what we killed only once its reap time came, so it is a
        zombie meanwhile); a client killed by anything but us, or running past its
        bound, is a violation."""
        now = time.monotonic()
        with self.lock:
            keep = []
            for e in self.procs:
                p = e["p"]
                if e["killed"]:
                    if now >= e["reap_at"] or final:
                        p.wait()
                    else:
                        keep.append(e)
                    continue
                rc = p.poll()
                if rc is None:
                    late = now - e["started"] > self.bound()
                    if late:
                        self.violations.append("a client ran %.0f s, past its bound of %.0f s (hung)"
                                               % (now - e["started"], self.bound()))
                    if late or final:
                        p.kill()
                        p.wait()
                    else:
                        keep.append(e)
                elif rc != 0:
                    self.violations.append("a client exited %d%s" % (rc, " (a signal we did not send)"
                                                                      if rc < 0 else ""))
            self.procs = keep

    def live(self, kind=None):
        return [e for e in self.procs if not e["killed"] and e["p"].returncode is None
                and (kind is None or e["kind"] == kind)]

    def killer(self, stop, rng):
        while not stop.is_set():
            time.sleep(rng.uniform(0.01, 0.08))
            with self.lock:
                live = self.live()
                if not live:
                    continue
                e = rng.choice(live)
                try:
                    os.kill(e["p"].pid, signal.SIGKILL)
                except OSError:
                    continue
                e["killed"] = True
                e["reap_at"] = time.monotonic() + rng.uniform(0, 2)  # a zombie meanwhile
                self.kills += 1

    def refill(self, stop):
        while not stop.is_set():
            self.check_exits()
            for kind, want in (("rate", self.size["clients"]), ("conc", self.size["holders"])):
                with self.lock:
                    missing = want - len(self.live(kind))
                for _ in range(missing):
                    self.start_client(kind)
            time.sleep(0.05)

    def operator(self, stop, rng):
        i = 0
        while not stop.wait(rng.uniform(0.8, 1.6)):
            i += 1
            if i % 3 == 0:
                self.event("daemon killed")
                self.daemon.kill()
                self.daemon.wait()
                self.start_daemon()
                self.event("daemon restarted")
                self.daemon_restarts += 1
            else:
                self.write_config(FORMS[i % len(FORMS)])
                self.event("reload to " + FORMS[i % len(FORMS)])
                self.daemon.send_signal(signal.SIGHUP)
                self.reloads += 1

    def event(self, what):
        """Operator events, on the clock the kernel stamps arrivals with, so that a
        violation at the destination can be set beside what happened then."""
        with self.lock:
            self.events.append((time.time_ns(), what))

    def events_near(self, ns, within=1.5e9):
        return ", ".join("%s %+.3f s" % (w, (t - ns) / 1e9) for t, w in self.events
                         if abs(t - ns) <= within) or "no operator event within 1.5 s"

    def stat(self):
        out = subprocess.run([os.path.join(self.build, "sluice"), "stat", "-c", self.config, "--json"],
                             capture_output=True, text=True, timeout=30).stdout
        return out.strip().replace("\n", " ")[:2000]

    def scribbler(self, stop, rng):
        # Where the key table starts, read before any scribble reaches the header.
        with segment.Segment(self.seg, enter=False) as f:
            self.keys_off = segment.layout(f)["tags"]
        while not stop.wait(rng.uniform(0.005, 0.03)):
            try:
                with segment.Segment(self.seg, enter=False) as f:
                    size = f.size
                    target = rng.choice(["header", "section", "lock", "stamp", "summary", "state",
                                         "resize"] + (["keys"] if self.keyed else []))
                    if target == "lock":
                        f.seek(48)
                        f.write(struct.pack("<Q", rng.getrandbits(64)))
                    elif target == "stamp":
                        # The lock word's nonce half: zero, or another's, under a
                        # token of the roster (live or not).
                        f.seek(48)
                        f.write(struct.pack("<II", rng.choice([1, 2, 1 << 20 | 1]), rng.choice([0, 1, 0xffffffff])))
                    elif target == "summary":
                        # One field of the summary the shims trust (src/core/summary.c):
                        # has_names, meters, index kinds, run, prefix lengths, the sum.
                        off, n = rng.choice([(60, 4), (348, 4), (384, 4), (388, 4), (392, 8), (400, 24), (456, 8)])
                        f.seek(off)
                        f.write(rng.choice([bytes(n), os.urandom(n)]))
                    elif target == "header":
                        f.seek(rng.randrange(8, 512 - 8))  # past magic and version
                        f.write(os.urandom(rng.randrange(1, 8)))
                    elif target == "resize":
                        # What truncating the old POSIX file did: resize the memfd
                        # the keeper hands over.  Its seals refuse; sizes never change.
                        line, fd = segment.ask(self.seg, "get")
                        try:
                            for want in (64, size * 2):
                                try:
                                    os.ftruncate(fd, want)
                                    fail("the segment's memfd could be resized to %d" % want)
                                except OSError:
                                    pass
                        finally:
                            os.close(fd)
                        self.resizes += 1
                    elif target == "keys":
                        # The key table: its tags and records (after the sections and
                        # the holder table, on a page of its own).
                        f.seek(rng.randrange(self.keys_off, size - 64))
                        f.write(os.urandom(rng.randrange(1, 64)))
                    else:
                        f.seek(4096 + rng.randrange(0, min(size - 4096, 64 * 4096) - 64))
                        f.write(os.urandom(rng.randrange(1, 64)))
                self.scribbles += 1
            except OSError:
                pass

    def phase(self, name, workers):
        stop = threading.Event()
        rng = random.Random(os.getpid())
        threads = [threading.Thread(target=w, args=(stop, rng) if w != self.refill else (stop,))
                   for w in workers + [self.refill]]
        for t in threads:
            t.start()
        time.sleep(self.size["seconds"])
        stop.set()
        for t in threads:
            t.join()
        # Let running clients finish their loops (each within its bound).
        end = time.monotonic() + self.bound() + 5
        while time.monotonic() < end:
            self.check_exits()
            with self.lock:
                if not self.live():
                    break
            time.sleep(0.2)
        self.check_exits(final=True)
        if self.violations:
            fail("%s: %s" % (name, "; ".join(sorted(set(self.violations)))))

    def run(self):
        sink_pf = os.path.join(self.work, "sink.port")
        sink = subprocess.Popen([sys.executable, os.path.join(HELPERS, "sink.py"), sink_pf, "900"])
        self.port = int(wait_file(sink_pf, "sink"))
        hold_pf = os.path.join(self.work, "hold.port")
        hold_sink = subprocess.Popen([sys.executable, os.path.join(HELPERS, "sink.py"), hold_pf, "900", "hold"])
        self.cport = int(wait_file(hold_pf, "holding sink"))
        csyn, cend = os.path.join(self.work, "conc-syn.log"), os.path.join(self.work, "conc-end.log")
        open(cend, "w").close()
        cready = os.path.join(self.work, "conc.ready")
        cwitness = subprocess.Popen([sys.executable, os.path.join(HELPERS, "syn_witness.py"), "--port",
                                     str(self.cport), "--out", csyn, "--ends-out", cend,
                                     "--ready-file", cready, "--lifetime", "900"])
        wait_file(cready, "concurrency witness")
        syn_log = os.path.join(self.work, "syn.log")
        ready = os.path.join(self.work, "witness.ready")
        witness = subprocess.Popen([sys.executable, os.path.join(HELPERS, "syn_witness.py"), "--port",
                                    str(self.port), "--out", syn_log, "--ready-file", ready,
                                    "--lifetime", "900"])
        wait_file(ready, "SYN witness")
        self.write_config(FORMS[0])
        self.start_daemon()
        try:
            rng = random.Random(1)
            self.phase("kill storms, daemon restarts, reloads",
                       [lambda s, r=rng: self.killer(s, r), lambda s, r=rng: self.operator(s, r)])
            time.sleep(0.3)
            for w in (witness, cwitness):
                w.terminate()  # SIGTERM: it counts its last drops before it goes
                w.wait()
            for log in (syn_log, csyn):
                lost = syn_witness.missed(log)
                if lost:
                    fail("phase 1: the witness missed %d packets of %s: no verdict on a record with "
                         "holes (a dropped SYN could hide an early one, a dropped FIN add one open)"
                         % (lost, log))
            most = max_open(csyn, cend)
            if most > CONCURRENCY:
                fail("phase 1: %d connections open at once at the destination under concurrency = %d"
                     % (most, CONCURRENCY))
            res = subprocess.run([sys.executable, os.path.join(HELPERS, "arrivals.py"), syn_log,
                                  "--interval-ms", str(INTERVAL_MS), "--slack-ms", str(SLACK_MS),
                                  "--at-least", "20", "--what", "connects"], capture_output=True, text=True)
            print(res.stdout.strip(), flush=True)
            if res.returncode != 0:
                at = [int(w) for w in res.stdout.replace("(at ", " ").split() if w.isdigit() and len(w) > 15]
                fail("phase 1: the destination saw more than the limit; near it: %s; stat: %s"
                     % (self.events_near(at[0]) if at else "?", self.stat()))
            print("phase 1 ok: %d clients and %d holders at a time, %d kills, %d daemon restarts, %d reloads; "
                  "at most %d of %d places open at the destination"
                  % (self.size["clients"], self.size["holders"], self.kills, self.daemon_restarts,
                     self.reloads, most, CONCURRENCY), flush=True)
            self.scribbling = True
            self.phase("scribbles", [lambda s, r=random.Random(2): self.scribbler(s, r)])
            print("phase 2 ok: %d scribbles of header, sections%s and lock word, %d resize attempts "
                  "refused; no client crashed or hung"
                  % (self.scribbles, ", key table" if self.keyed else "", self.resizes), flush=True)
        finally:
            for p in (self.daemon, sink, witness, hold_sink, cwitness):
                if p and p.poll() is None:
                    p.kill()
            try:
                segment.remove(self.seg)
            except OSError:
                pass
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--size", choices=sorted(SIZES), default="ci")
    ap.add_argument("--keyed", action="store_true", help="both sections keyed (per = address): "
                    "the same limits through the key table")
    a = ap.parse_args()
    return Chaos(os.path.abspath(a.build), a.work, a.size, a.keyed).run()


if __name__ == "__main__":
    sys.exit(main())
