#!/usr/bin/env python3
"""Run the README's `$` commands as written (t_readme).

    readme_commands.py README WORKDIR WITNESS

In the README's indented code blocks, a line "    $ CMD" is a command.  After
"$ cat FILE" the block's next lines are FILE's content, written into WORKDIR
before the commands run; after any other command they are output it must print
(compared with every number free to differ).  Each command runs in WORKDIR under
bash and must exit 0.  A `sluice run` is also held to its rate at the
destination: WITNESS is the SYN witness's record of the local server standing in
for the README's names, and the arrivals during the command must keep the rate
(helpers/arrivals.py).  Prints one line a command; exits 1 on the first failure.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def blocks(path):
    """(command, following lines) for each `$` line of the indented blocks."""
    out, cur = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("    $ "):
            cur = (line[6:], [])
            out.append(cur)
        elif cur is not None and line.startswith("    ") and line.strip():
            cur[1].append(line[4:])
        else:
            cur = None
    return out


def loose(expected):
    """A pattern for an output line: the text as written, every number free."""
    parts = re.split(r"\d+(?:\.\d+)?", expected)
    return re.compile("^" + r"\d+(?:\.\d+)?".join(re.escape(p) for p in parts) + "$")


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


def main():
    readme, workdir, witness = sys.argv[1:4]
    cmds = blocks(readme)
    if not cmds:
        print("FAIL: no $ commands in %s" % readme)
        return 1
    for cmd, follow in cmds:  # the files first: a command may come before its file
        m = re.fullmatch(r"cat (\S+)", cmd)
        if m:
            with open(os.path.join(workdir, m.group(1)), "w") as f:
                f.write("\n".join(follow) + "\n")
    for cmd, follow in cmds:
        if cmd.startswith("cat "):
            continue
        seen = os.path.getsize(witness)
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
        interval = rate_of(cmd, workdir) if cmd.startswith("sluice run") else None
        if interval:
            subprocess.run(["sleep", "0.3"])
            part = os.path.join(workdir, ".arrivals")
            with open(witness) as f, open(part, "w") as g:
                f.seek(seen)
                g.write(f.read())
            a = subprocess.run([sys.executable, os.path.join(HERE, "arrivals.py"), part, "--interval-ms",
                                "%g" % interval, "--at-least", "2", "--what", "at the server"],
                               capture_output=True, text=True)
            if a.returncode != 0:
                print("FAIL: `%s` at the destination: %s" % (cmd, a.stdout + a.stderr))
                return 1
            note = "; " + a.stdout.strip()
        print("ran `%s`%s" % (cmd, note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
