#!/usr/bin/env python3
"""Holds a layer to the headers it has been allowed: every #include in the C++ files (*.hpp,
*.cpp, subfolders too) of DIR must match a line of ALLOW_LIST, or the check fails naming
FILE:LINE of each one that does not. An allow-list, not a deny-list, so a header nobody thought
to forbid (<random>, <iostream>, a layer above) fails until someone decides it belongs.

ALLOW_LIST holds one pattern a line, written as the include is, with its <> or "" and shell
wildcards: `<cstdint>`, `"wire/*"`. Blank lines and lines starting with # are skipped.

usage: check_includes.py DIR ALLOW_LIST
"""
import fnmatch
import os
import re
import sys

INCLUDE = re.compile(r"^\s*#\s*include\b\s*(.*?)\s*(//.*|/\*.*)?$")


def allow_list(path):
    with open(path, encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]


def sources(root):
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".hpp", ".cpp")):
                yield os.path.join(top, name)


def main():
    if len(sys.argv) != 3:
        print("usage: check_includes.py DIR ALLOW_LIST", file=sys.stderr)
        return 2
    root, allowed = sys.argv[1], allow_list(sys.argv[2])
    offences, files = [], 0
    for path in sources(root):
        files += 1
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m and not any(fnmatch.fnmatchcase(m.group(1), p) for p in allowed):
                    offences.append(f"{path}:{number}: #include {m.group(1)} is not in {sys.argv[2]}")
    if files == 0:
        print(f"check_includes: no .hpp or .cpp files in {root}")
        return 1
    for o in offences:
        print(o)
    if offences:
        print(f"check_includes: {len(offences)} include(s) outside the allow-list")
        return 1
    print(f"check_includes: the {files} files of {root} include only what {sys.argv[2]} allows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
