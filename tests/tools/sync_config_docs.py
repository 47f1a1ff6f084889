#!/usr/bin/python3
"""Writes every config key's row into docs/config.md and its commented assignment into
configs/default.toml, from the key tables in include/headlab/io/config.h as the binary reports
them (`headlab info --keys --json`). Rows and blocks of keys that exist are rewritten in place,
new keys go after the key before them, and the rest of both files is left as it is.
tests/io/test_config.cpp checks both files against the tables; run this after changing a key:

    /usr/bin/python3 tests/tools/sync_config_docs.py build/headlab
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRAP = 100  # a default.toml comment longer than this puts the type line under the doc


def key_rows(binary):
    out = subprocess.check_output([binary, "info", "--keys", "--json"], text=True)
    return json.loads(out)["keys"]


def docs_row(row):
    allowed = f"`{row['allowed']}`" if row["allowed"] else ""
    return f"| `{row['key']}` | {row['type']} | `{row['default']}` | {allowed} | {row['doc']} |"


def toml_block(row):
    allowed = row["allowed"]
    if allowed and row["type"] == "string":
        allowed = "one of " + allowed
    meta = f"({row['type']}{', ' + allowed if allowed else ''}; default {row['default']})"
    one_line = f"# {row['doc']} {meta}"
    comment = [one_line] if len(one_line) <= WRAP else [f"# {row['doc']}", f"# {meta}"]
    name = row["key"].split(".", 1)[1]
    return comment + [f"{name} = {row['default']}"]


def sync_docs(rows, path):
    lines = path.read_text().split("\n")
    prefix = lambda key: f"| `{key}` |"
    previous = None
    for row in rows:
        at = next((i for i, l in enumerate(lines) if l.startswith(prefix(row["key"]))), None)
        if at is not None:
            lines[at] = docs_row(row)
        else:
            if previous is None:
                sys.exit(f"{path}: no row to put {row['key']} after; add the first row by hand")
            after = next(i for i, l in enumerate(lines) if l.startswith(prefix(previous)))
            lines.insert(after + 1, docs_row(row))
        previous = row["key"]
    path.write_text("\n".join(lines))


def sync_toml(rows, path):
    lines = path.read_text().split("\n")

    def find(key):  # (first comment line, assignment line) of key's block, or None
        section, name = key.split(".", 1)
        current = None
        for i, line in enumerate(lines):
            if line.startswith("["):
                current = line[1:line.index("]")]
            elif current == section and line.startswith(name + " = "):
                start = i
                while start > 0 and lines[start - 1].startswith("#"):
                    start -= 1
                return start, i
        return None

    previous = None
    for row in rows:
        block = toml_block(row)
        found = find(row["key"])
        if found:
            start, end = found
            lines[start:end + 1] = block
        else:
            if previous is None or previous.split(".")[0] != row["key"].split(".")[0]:
                sys.exit(f"{path}: no key of [{row['key'].split('.')[0]}] to put {row['key']} after; add it by hand")
            _, end = find(previous)
            lines[end + 1:end + 1] = [""] + block
        previous = row["key"]
    path.write_text("\n".join(lines))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "headlab")
    rows = key_rows(binary)
    sync_docs(rows, ROOT / "docs" / "config.md")
    sync_toml(rows, ROOT / "configs" / "default.toml")


if __name__ == "__main__":
    main()
