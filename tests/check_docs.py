#!/usr/bin/env python3
"""Keeps history out of the prose: commit hashes belong in commit messages, not in what a reader
of the tree meets. Fails, with one line per offence naming FILE:LINE, when

  - a Markdown file (README.md, docs/**, any other *.md) or a comment in a source file (C++,
    Python, shell, CMake, linker scripts) holds a commit reference: a word of 7 to 40 lowercase
    hex digits with at least one digit and one letter (0x constants are not words of their own
    and so never match; an EUI-64 GUID, 16 digits with ff:fe in its middle, is not a commit);
  - a Markdown file or a source comment sends the reader to a path outside the repository (the
    shared folder beside the checkout): optional test data is found through the CMake variable
    SOFTRDMA_SHARED_DIR, never through the docs;
  - a source comment points to the design document kept outside the repository: it points to
    docs/*.md or the spec instead, or gives the reason itself;
  - README.md is longer than 300 lines.

Test data is not prose and is not read: tests/data, tests/fuzz/corpus, captures, and the output
files scripts/bench.sh writes (docs/bench/run.txt names the build it measured on purpose).
Strings in code are not read either, so golden bytes and hex literals in tests are left alone.

usage: check_docs.py SOURCE_DIR
"""
import ast
import io
import os
import re
import sys
import tokenize

README_MAX_LINES = 300

SKIP_DIRS = {"tests/data", "tests/fuzz/corpus", "docs/bench/logs"}
SKIP_FILES = {"docs/bench/run.txt", "docs/bench/table.txt", "docs/bench/results.csv"}
BINARY_SUFFIXES = (".pcap", ".pcapng", ".png", ".bin", ".csv", ".tsv", ".gz", ".so")

HEX_WORD = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
SHARED_PATH = re.compile(r"\.\./shared\b")
OUTSIDE_DOC = re.compile(r"\bDESIGN\.md\b")


def commit_like(word):
    if not (re.search(r"[0-9]", word) and re.search(r"[a-f]", word)):
        return False
    if len(word) == 16 and word[6:10] == "fffe":
        return False  # an EUI-64 GUID (a MAC with ff:fe inserted), as ibv_devices prints one
    return True


def commit_refs(text):
    return [m.group(0) for m in HEX_WORD.finditer(text) if commit_like(m.group(0))]


def c_comments(text):
    """(line, text) of every // and /* */ comment, skipping string and character literals
    (raw strings included)."""
    out = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for k, part in enumerate(text[i:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            end = text.find(")" + delim + '"', open_paren)
            end = n if end < 0 else end + len(delim) + 2
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                i += 1  # a digit separator: 10'000
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def python_comments(text):
    """(line, text) of every # comment and every docstring."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
        tree = ast.parse(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [(k + 1, l) for k, l in enumerate(text.split("\n"))]  # judge it all
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                for k, part in enumerate(body[0].value.value.split("\n")):
                    out.append((body[0].lineno + k, part))
    return out


def hash_comments(text):
    """(line, text) of # comments in shell and CMake: a # that starts a word outside quotes."""
    out = []
    for number, l in enumerate(text.split("\n"), 1):
        quote = None
        k = 0
        while k < len(l):
            c = l[k]
            if quote:
                if c == "\\" and quote == '"':
                    k += 1  # an escaped character
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#" and (k == 0 or l[k - 1] in " \t;(|&"):
                out.append((number, l[k:]))
                break
            k += 1
    return out


def comment_lines(rel, text):
    name = os.path.basename(rel)
    if name.endswith((".cpp", ".hpp", ".h", ".c", ".cc", ".map")):
        return c_comments(text)
    if name.endswith(".py"):
        return python_comments(text)
    if name.endswith((".sh", ".cmake", ".gp", ".service")) or name in ("CMakeLists.txt", "run", ".gitignore") \
            or text.startswith("#!"):
        return hash_comments(text)
    return []


def skipped(rel):
    return rel in SKIP_FILES or rel.endswith(BINARY_SUFFIXES) or any(
        rel == d or rel.startswith(d + "/") for d in SKIP_DIRS)


def files(root):
    for top, dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root)
        keep = []
        for d in dirs:
            rel = os.path.normpath(os.path.join(rel_top, d))
            if rel_top == "." and (d.startswith("build") or d in (".git", ".cache")):
                continue
            if not skipped(rel):
                keep.append(d)
        dirs[:] = sorted(keep)
        for name in sorted(names):
            rel = os.path.normpath(os.path.join(rel_top, name))
            if not skipped(rel):
                yield rel


def main():
    if len(sys.argv) != 2:
        print("usage: check_docs.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    offences = []
    for rel in files(root):
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if rel.endswith(".md"):
            lines = list(enumerate(text.split("\n"), 1))
            for number, l in lines:
                for ref in SHARED_PATH.findall(l):
                    offences.append(f"{rel}:{number}: a path outside the repository ({ref}): describe "
                                    "the thing, or name SOFTRDMA_SHARED_DIR for optional test data")
            where = "text"
            if rel == "README.md":
                count = text.count("\n") + (0 if text.endswith("\n") else 1)
                if count > README_MAX_LINES:
                    offences.append(f"{rel}:{README_MAX_LINES + 1}: README.md has {count} lines, "
                                    f"at most {README_MAX_LINES}: move detail to docs/")
        else:
            lines = comment_lines(rel, text)
            where = "comment"
            for number, l in lines:
                for ref in SHARED_PATH.findall(l):
                    offences.append(f"{rel}:{number}: a path outside the repository ({ref}) in a comment: "
                                    "name SOFTRDMA_SHARED_DIR for optional test data")
                for ref in OUTSIDE_DOC.findall(l):
                    offences.append(f"{rel}:{number}: {ref} is not in the repository: point to docs/*.md "
                                    "or the spec, or give the reason")
        for number, l in lines:
            for ref in commit_refs(l):
                offences.append(f"{rel}:{number}: commit reference '{ref}' in a {where}: "
                                "say why, and leave the history to the commit message")
    for o in offences:
        print(o)
    if offences:
        print(f"check_docs: {len(offences)} offence(s)")
        return 1
    print("check_docs: no commit references or outside paths or documents in docs and comments; README.md within "
          f"{README_MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
