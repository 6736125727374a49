#!/usr/bin/env python3
"""Run the `$` commands of the README and the docs as written (t_readme).

    readme_commands.py WORKDIR WITNESS[,WITNESS...] FILE...

In the files' indented code blocks, a line "    $ CMD" is a command; the files'
commands run in the order given, in one WORKDIR.  After
"$ cat FILE" the block's next lines are FILE's content, written into WORKDIR
before the commands run; after any other command they are output it must print
(compared with every number free to differ, and the spaces between words, which
move with the numbers' widths in a table).  Each command runs in WORKDIR under
bash and must exit 0.  The operator's commands (a package installed, users made)
are left to the tests that run them: OPERATOR says which, and a README command of
that kind that no test runs fails this one.  A `sluice run` is also held to its rate at the
destination: each WITNESS is a SYN witness's record of a local server (the one
standing in for the README's names, and the one its examples start), and the
arrivals at them during the command must keep the rate
(helpers/arrivals.py).  Prints one line a command; exits 1 on the first failure.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ACQUIRE_SLACK_MS = 30.0


def blocks(path):
    """(command, following lines) for each `$` line of the indented blocks (a
    block inside a list item is indented further: its lines lose that indent)."""
    out, cur, indent = [], None, 0
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        m = re.match(r"( {4,})\$ (.*)", line)
        if m:
            indent = len(m.group(1))
            cur = (m.group(2), [])
            out.append(cur)
        elif cur is not None and line.startswith(" " * indent) and line.strip():
            cur[1].append(line[indent:])
        else:
            cur = None
    return out


def loose(expected):
    """A pattern for an output line: the text as written, every number free."""
    def words(text):
        return r"\s+".join(re.escape(w) for w in re.split(r"\s+", text))

    parts = re.split(r"\d+(?:\.\d+)?", expected.strip())
    return re.compile(r"^\s*" + r"\d+(?:\.\d+)?".join(words(p) for p in parts) + r"\s*$")


def rate_of(cmd, workdir):
    """The rate a `sluice run` keeps, as an interval in ms (None: not one)."""
    m = re.search(r"--rate (\d+)/s\b", cmd)
    if not m:
        c = re.search(r"-c (\S+)", cmd)
        if not c:
            return None
        with open(os.path.join(workdir, c.group(1))) as f:
            m = re.search(r"^rate\s*=\s*(\d+)/s\s*$", f.read(), re.M)
    return 1000.0 / int(m.group(1)) if m else None


# The operator's commands, which need root on the machine itself (a package
# installed, users made): not `$` commands, so not run here, but each is run as
# written - or as near as a throwaway root allows - by the test named, which
# must still hold the text given.  None means not run anywhere, and why.
OPERATOR = {
    "make deb": ("t_deb.sh", "BUILD_DIR\" deb"),
    "sudo apt install ./build/sluice_*.deb": ("helpers/deb_inside.sh", "apt install -y ./sluice.deb"),
    "make install": ("t_install.sh", "install PREFIX="),
    "make install PREFIX=/usr/local [DESTDIR=...]": ("t_install.sh", "install PREFIX=/opt/sluice DESTDIR="),
    "systemd-sysusers; systemd-tmpfiles --create": ("t_install.sh", "systemd-tmpfiles --root="),
    "systemctl daemon-reload && systemctl enable --now sluiced":
        (None, "needs systemd as PID 1; t_install checks the unit with systemd-analyze verify"),
    "sudo systemctl reload sluiced":
        (None, "needs systemd as PID 1; the unit's ExecReload is sluice reload, which t_reload_live runs"),
    "sudo apt remove sluice": ("helpers/deb_inside.sh", "dpkg -r sluice"),
    "sudo apt purge sluice": ("helpers/deb_inside.sh", "dpkg -P sluice"),
    "groupadd sluice": ("t_group.sh", "groupadd \"$grp\""),
    "usermod -aG sluice alice": ("helpers/deb_inside.sh", "usermod -aG sluice sluicetester"),
}
OPERATOR_WORDS = ("sudo ", "apt ", "apt-get ", "dpkg ", "systemctl ", "systemd-", "groupadd ", "useradd ",
                  "usermod ", "make install", "make deb")


def operator_lines(path):
    """Lines of the indented blocks that are operator commands (comments cut)."""
    out = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("    ") and line.strip().startswith(OPERATOR_WORDS):
            out.append(line.split("#", 1)[0].strip())
    return out


def check_operator(readme):
    """Every operator command of the file is in OPERATOR, and its test holds it."""
    tests = os.path.dirname(HERE)
    for cmd in operator_lines(readme):
        if cmd not in OPERATOR:
            print("FAIL: %s's `%s` is run by no test (add it to OPERATOR in %s)" % (readme, cmd, __file__))
            return 1
        test, marker = OPERATOR[cmd]
        if test is None:
            print("not run: `%s` (%s)" % (cmd, marker))
            continue
        with open(os.path.join(tests, test), encoding="utf-8") as f:
            if marker not in f.read():
                print("FAIL: %s no longer runs %s's `%s` (no %r in it)" % (test, readme, cmd, marker))
                return 1
        print("run by %s: `%s`" % (test, cmd))
    return 0


def main():
    workdir, witnesses, docs = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
    cmds = []
    for doc in docs:
        if check_operator(doc):
            return 1
        cmds += blocks(doc)
    if not cmds:
        print("FAIL: no $ commands in %s" % " ".join(docs))
        return 1
    for cmd, follow in cmds:  # the files first: a command may come before its file
        m = re.fullmatch(r"cat (\S+)", cmd)
        if m:
            with open(os.path.join(workdir, m.group(1)), "w") as f:
                f.write("\n".join(follow) + "\n")
    for cmd, follow in cmds:
        if cmd.startswith("cat "):
            continue
        seen = [os.path.getsize(w) for w in witnesses]
        r = subprocess.run(["bash", "-c", cmd], cwd=workdir, capture_output=True, text=True, timeout=120)
        said = (r.stdout + r.stderr).splitlines()
        if r.returncode != 0:
            print("FAIL: `%s` exited %d: %s" % (cmd, r.returncode, "\n".join(said)))
            return 1
        for want in follow:
            if not any(loose(want).match(line) for line in said):
                print("FAIL: `%s` did not print a line like %r; it printed:\n%s" % (cmd, want, "\n".join(said)))
                return 1
        note = ""
        # `sluice run` is held to the rate at the destination; a loop of `sluice
        # acquire`s paces the releases, and each program starts a few ms after its
        # own, so its arrivals are held to the rate with ACQUIRE_SLACK_MS of slack.
        shaped = "sluice run " in cmd or "sluice acquire" in cmd
        interval = rate_of(cmd, workdir) if shaped else None
        slack = ACQUIRE_SLACK_MS if "sluice acquire" in cmd else 1.0
        if interval:
            subprocess.run(["sleep", "0.3"])
            part = os.path.join(workdir, ".arrivals")
            lines = []
            for w, at in zip(witnesses, seen):
                with open(w) as f:
                    f.seek(at)
                    lines += f.read().splitlines(keepends=True)
            with open(part, "w") as g:
                g.write("".join(sorted(lines, key=lambda l: int(l.split()[0]) if l[:1].isdigit() else 0)))
            a = subprocess.run([sys.executable, os.path.join(HERE, "arrivals.py"), part, "--interval-ms",
                                "%g" % interval, "--slack-ms", "%g" % slack, "--at-least", "2",
                                "--what", "at the server"],
                               capture_output=True, text=True)
            if a.returncode != 0:
                print("FAIL: `%s` at the destination: %s" % (cmd, a.stdout + a.stderr))
                return 1
            note = "; " + a.stdout.strip()
        print("ran `%s`%s" % (cmd, note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
