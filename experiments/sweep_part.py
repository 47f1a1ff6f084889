#!/usr/bin/env python3
"""One part of a sweep: the sweep file with one grid key (train.seed by default, or train.lr) cut
to some of its values, its name, base and run folders unchanged, so a part's runs are the full
sweep's. The run scripts run an arm for some seeds (or rates) this way, across sessions.

  python3 experiments/sweep_part.py SWEEP.toml PATH "0 1" [KEY]     writes PATH, prints it
"""
import json
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402


def fail(message):
    common.fail(message, "sweep_part")


def parse_values(text, key="train.seed"):
    """"0 1" (or "5e-4 1e-3" for a key other than train.seed) as a set, None when empty."""
    kind = int if key == "train.seed" else float
    try:
        return {kind(v) for v in text.replace(",", " ").split()} or None
    except ValueError:
        fail(f"{key} values {text!r}: expected numbers separated by spaces")


def subset_sweep(sweep_path, path, values, key="train.seed"):
    """Writes PATH: the sweep file SWEEP with its `key` grid cut to `values`; prints PATH."""
    sweep = tomllib.loads(open(sweep_path).read())
    grid = sweep.get("grid", {}).get(key)
    if grid is None or values is None or not values <= set(grid):
        fail(f"{sweep_path}: {sorted(values or [])} must be a subset of its {key} grid {grid}")
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(sweep_path)), sweep["base"]))
    lines = [f"# {os.path.basename(sweep_path)} cut to {key} {sorted(values)} (experiments/sweep_part.py).",
             f'base = "{base}"', f'name = "{sweep.get("name", os.path.splitext(os.path.basename(sweep_path))[0])}"',
             "", "[set]"]
    lines += [f'"{k}" = {json.dumps(value)}' for k, value in sweep.get("set", {}).items()]
    lines += ["", "[grid]"]
    lines += [f'"{k}" = {json.dumps(sorted(values) if k == key else value)}' for k, value in sweep["grid"].items()]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    common.write_atomically(path, "\n".join(lines) + "\n")
    print(path)


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        fail("usage: sweep_part.py SWEEP.toml PATH VALUES [KEY]")
    key = sys.argv[4] if len(sys.argv) == 5 else "train.seed"
    subset_sweep(sys.argv[1], sys.argv[2], parse_values(sys.argv[3], key), key)
