#!/usr/bin/env python3
"""Regenerates the command outputs and the numbers quoted in the docs, so they cannot go stale.

Two kinds of marker, in docs/*.md and README.md:

1. A whole output. A block

    <!-- capsim-output: simulate workloads/chatbot-500-users.yaml -q -->
    ```text
    ...
    ```

   holds exactly what `build/capsim simulate workloads/chatbot-500-users.yaml -q` prints (stdout,
   run from the repository root).

2. A value quoted in prose. Inline,

    the cheapest is <!-- capsim-value: plan workloads/chatbot-500-users.yaml -q | options.0.card -->rtx-3090<!-- /capsim-value -->

   holds one value of what `build/capsim ARGS --json -` prints (`--json -` is added), written as
   FORMAT gives it: `<!-- capsim-value: ARGS | PATH | FORMAT -->TEXT<!-- /capsim-value -->`.
   PATH is a dot-separated walk into the JSON: `key` (an object's field), `N` (an array's N-th
   element, from 0), `#` (an array's length), `key=value` (an array's first element whose `key`,
   written as below without a format, is `value`; e.g. `deployments.best=true.deployment`).
   FORMAT is optional: absent, a string is written as is, true/false as such, an integer in
   decimal and any other number as printf's %g; `%.2f` (any printf conversion of one number);
   `time` for a value in milliseconds written as capsim writes times (`2.38 s`, `215.40 ms`).
   Each command runs once however many values quote it.

3. Markdown that a command writes (docs/data-formats.md#scenario-fields): the lines between

    <!-- capsim-markdown: list scenario-fields -->
    <!-- /capsim-markdown -->

   are what `build/capsim list scenario-fields` prints, inserted as Markdown (the test that the
   command's own code holds, tests/scenario/scenario_fields_test.cc, fails when they differ).

tests/cli/docs_output_test.cc runs every such command and fails when a block or a value differs
(it evaluates PATH and FORMAT by the same rules); this script rewrites the blocks and values from
the current build:

    python3 scripts/update_docs.py [build/capsim] [docs/scenarios.md docs/planning.md ...]
"""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- capsim-output: (.*) -->$")
MARKDOWN = re.compile(r"^<!-- capsim-markdown: (.*) -->$")
MARKDOWN_END = "<!-- /capsim-markdown -->"
VALUE = re.compile(r"<!-- capsim-value: (.*?) -->(.*?)<!-- /capsim-value -->")


def default_docs():
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")) + ["README.md"]


def run(binary, args):
    r = subprocess.run([binary] + shlex.split(args), cwd=ROOT, capture_output=True, text=True)
    return r.stdout


def plain(v):
    """A JSON value written without a format (and as `key=value` filters compare it)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%g" % v
    return json.dumps(v, separators=(",", ":"))


def format_time(s):
    """capsim's units::format_time."""
    a = abs(s)
    if a >= 1:
        return "%.2f s" % s
    if a >= 1e-3:
        return "%.2f ms" % (s * 1e3)
    if a >= 1e-6:
        return "%.1f us" % (s * 1e6)
    return "%.0f ns" % (s * 1e9)


def walk(doc, path):
    v = doc
    for seg in path.split("."):
        if seg == "#":
            v = len(v)
        elif "=" in seg:
            key, want = seg.split("=", 1)
            v = next(x for x in v if plain(x.get(key)) == want)
        elif isinstance(v, list):
            v = v[int(seg)]
        else:
            v = v[seg]
    return v


def render(v, fmt):
    if fmt is None:
        return plain(v)
    if fmt == "time":
        return format_time(v / 1e3)
    return fmt % v


def value_text(binary, spec, cache):
    parts = [p.strip() for p in spec.split(" | ")]
    args, path, fmt = parts[0], parts[1], parts[2] if len(parts) > 2 else None
    if args not in cache:
        cache[args] = json.loads(run(binary, args + " --json -"))
    return render(walk(cache[args], path), fmt)


def update(path, binary, cache):
    lines = Path(path).read_text().split("\n")
    out, i, changed = [], 0, 0
    while i < len(lines):
        def fill(m):
            nonlocal changed
            text = value_text(binary, m.group(1), cache)
            if text != m.group(2):
                changed += 1
            return "<!-- capsim-value: %s -->%s<!-- /capsim-value -->" % (m.group(1), text)

        out.append(VALUE.sub(fill, lines[i]))
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
        m = MARKDOWN.match(lines[i])
        if m and MARKDOWN_END in lines[i + 1:]:
            end = lines.index(MARKDOWN_END, i + 1)
            body = run(binary, m.group(1)).rstrip("\n").split("\n")
            if body != lines[i + 1:end]:
                changed += 1
            out.extend(body + [MARKDOWN_END])
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
    cache = {}
    for doc in args or default_docs():
        n = update(ROOT / doc, binary, cache)
        print(f"{doc}: {n} block(s) or value(s) changed")


if __name__ == "__main__":
    main()
