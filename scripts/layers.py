#!/usr/bin/env python3
"""Check that no lower layer includes a higher one (docs/design.md, "Layers").

    scripts/layers.py [ROOT]

A header include/sluice/X.h belongs to the layer of the folder that has X.c (the
lowest, where two have one); a header no folder implements belongs to none and
may be included anywhere.  A file of src/LAYER, and a header of LAYER, may include
the headers of the layers LAYER stands on, below.  Local headers ("record.h") are
their folder's own.  Prints each include that breaks the order and exits 1 on any.
"""
import os
import re
import sys

# Each layer and the layers it may include, bottom up.
ORDER = ["proto", "core", "progs", "shim", "daemon", "supervisor", "cli"]
MAY_INCLUDE = {
    "proto": {"proto"},
    "core": {"proto", "core"},
    "progs": {"proto", "core", "progs"},
    "shim": {"proto", "core", "shim"},
    "daemon": {"proto", "core", "progs", "daemon"},
    "supervisor": {"proto", "core", "progs", "supervisor"},
    "cli": set(ORDER),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"sluice/([A-Za-z0-9_-]+)\.h"', re.M)


def header_layers(root):
    """The layer of each include/sluice header that some folder implements."""
    layer = {}
    for name in ORDER:
        folder = os.path.join(root, "src", name)
        for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if f.endswith(".c") and f[:-2] not in layer:
                layer[f[:-2]] = name
    return layer


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    layer = header_layers(root)
    files = []
    for name in ORDER:
        folder = os.path.join(root, "src", name)
        files += [(os.path.join(folder, f), name) for f in sorted(os.listdir(folder)) if f.endswith((".c", ".h"))]
    inc = os.path.join(root, "include", "sluice")
    files += [(os.path.join(inc, f), layer[f[:-2]]) for f in sorted(os.listdir(inc))
              if f.endswith(".h") and f[:-2] in layer]
    bad = 0
    for path, own in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for h in INCLUDE.findall(text):
            theirs = layer.get(h)
            if theirs is not None and theirs not in MAY_INCLUDE[own]:
                print("%s (%s) includes sluice/%s.h (%s): a lower layer may not include a higher one"
                      % (os.path.relpath(path, root), own, h, theirs))
                bad += 1
    print("layers: %d files, %d includes out of order" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
