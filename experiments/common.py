"""Helpers shared by the experiments' make_results.py scripts (experiments/<name>/make_results.py
puts this folder on sys.path): one-line failures, CSV reading, mean ± std over seeds, and the
atomic write of RESULTS.md, and Holm's correction, which both experiments' tests use.
experiments/tests/ tests these and the experiments' statistics."""
import csv
import math
import os
import sys


def fail(message, prog="make_results"):
    """Bad input: one line on stderr, exit code 2."""
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(2)


def read_csv(path, hint="run the experiment first"):
    if not os.path.exists(path):
        fail(f"{path} is missing: {hint}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def number(text):
    return float(text) if text not in ("", None) else math.nan


def mean_std(values):
    """Mean and sample standard deviation (n - 1) of the non-NaN values; NaN where undefined."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else math.nan
    return m, s


def pm(m, s, digits):
    """`m ± s` with `digits` decimals, `m` alone without a std, `–` without a mean."""
    if math.isnan(m):
        return "–"
    return f"{m:.{digits}f} ± {s:.{digits}f}" if not math.isnan(s) else f"{m:.{digits}f}"


def holm(p_values):
    """Holm's step-down adjusted p values, in the input's order: sorted ascending, the k-th smallest
    (k from 0) becomes max over j <= k of min(1, (m - j) p_(j)). A hypothesis is rejected at
    family-wise level alpha where its adjusted p is at most alpha. Ties keep their input order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running, m = [math.nan] * len(p_values), 0.0, len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
