#!/usr/bin/env python3
"""Regenerates the command outputs embedded in the docs, so their numbers cannot go stale.

A block in a Markdown file

    <!-- capsim-output: simulate workloads/chatbot-500-users.yaml -q -->
    ```text
    ...
    ```

holds exactly what `build/capsim simulate workloads/chatbot-500-users.yaml -q` prints (stdout,
run from the repository root). tests/cli/docs_output_test.cc runs every such command and fails
when a block differs; this script rewrites the blocks from the current build:

    python3 scripts/update_docs.py [build/capsim] [docs/scenarios.md docs/planning.md ...]
"""
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DOCS = ["docs/scenarios.md", "docs/planning.md"]
MARKER = re.compile(r"^<!-- capsim-output: (.*) -->$")


def run(binary, args):
    r = subprocess.run([binary] + shlex.split(args), cwd=ROOT, capture_output=True, text=True)
    return r.stdout


def update(path, binary):
    lines = Path(path).read_text().split("\n")
    out, i, changed = [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        m = MARKER.match(lines[i])
        if m and i + 1 < len(lines) and lines[i + 1] == "```text":
            end = i + 2
            while end < len(lines) and lines[end] != "```":
                end += 1
            body = run(binary, m.group(1)).rstrip("\n").split("\n")
            if body != lines[i + 2:end]:
                changed += 1
            out.extend(["```text"] + body + ["```"])
            i = end + 1
            continue
        i += 1
    Path(path).write_text("\n".join(out))
    return changed


def main():
    args = sys.argv[1:]
    binary = str(ROOT / "build" / "capsim")
    if args and not args[0].endswith(".md"):
        binary = args.pop(0)
    for doc in args or DEFAULT_DOCS:
        n = update(ROOT / doc, binary)
        print(f"{doc}: {n} block(s) changed")


if __name__ == "__main__":
    main()
