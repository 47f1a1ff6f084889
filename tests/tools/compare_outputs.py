"""compare_outputs.py A B: is every file headlab wrote under folder A the same under B?

CSV files are compared without their timing columns, config.toml without its commit line,
summary.md without its tokens/s column, HDF5 files dataset by dataset and root attribute by root
attribute (NaN equal to NaN) without the build's provenance, the run's elapsed time and
headlab_kind (which names the file's kind: a format change, not a result). Logs are skipped.
Prints each file that differs and a count; exit status 1 if any does. Used by same_outputs.sh."""
import csv
import os
import re
import sys

import h5py
import numpy as np

TIMING_COLUMNS = {"tokens_per_s", "elapsed_s", "seconds", "time_s"}
LEFT_OUT_ATTRIBUTES = {"headlab_kind", "headlab_version", "headlab_commit", "headlab_build_type", "blis_kernels",
                       "elapsed_s"}


def csv_rows(path):
    rows = list(csv.reader(open(path, newline="")))
    if not rows:
        return rows
    keep = [i for i, name in enumerate(rows[0]) if name not in TIMING_COLUMNS]
    return [[row[i] for i in keep if i < len(row)] for row in rows]


def lines_without(path, drop):
    return [drop(line) for line in open(path).read().splitlines()]


def hdf5_contents(path):
    out = {}
    with h5py.File(path, "r") as f:
        for key, value in f.attrs.items():
            if key not in LEFT_OUT_ATTRIBUTES:
                out["@" + key] = value
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def same_value(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def same_file(a, b, name):
    if name.endswith(".csv"):
        return csv_rows(a) == csv_rows(b)
    if name.endswith(".h5"):
        x, y = hdf5_contents(a), hdf5_contents(b)
        differ = sorted(k for k in set(x) | set(y) if k not in x or k not in y or not same_value(x[k], y[k]))
        if differ:
            print(f"  {name}: {', '.join(differ[:6])}{' ...' if len(differ) > 6 else ''}")
        return not differ
    if name == "config.toml":
        drop = lambda line: "" if line.startswith("# headlab_commit") else line
        return lines_without(a, drop) == lines_without(b, drop)
    if name == "summary.md":  # the table's last column is tokens/s
        drop = lambda line: re.sub(r"\| [0-9,]+ \|$", "|", line)
        return lines_without(a, drop) == lines_without(b, drop)
    return open(a, "rb").read() == open(b, "rb").read()


def main():
    a_root, b_root = sys.argv[1:3]
    compared = differ = 0
    for folder, _, files in os.walk(a_root):
        for name in sorted(files):
            if name.endswith((".log", ".lock")):
                continue
            a = os.path.join(folder, name)
            rel = os.path.relpath(a, a_root)
            b = os.path.join(b_root, rel)
            compared += 1
            if not os.path.exists(b) or not same_file(a, b, name):
                print("differs:", rel)
                differ += 1
    print(f"{compared} files compared, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
