#!/usr/bin/env python3
"""Checks the DOM Chromium dumped of a headlab report (.ci/test-browser); standard library only.

  check_report_dom.py DOM --report REPORT.html [--heads-csv heads.csv] [--example NAME --layer L --head H|mean|all]
                      [--gold-csv attention_example_I_gold_alignment.csv] [--runs N] [--circuits RUN]

- the page ran to the end (body data-ready="1") and #js-errors is empty;
- with --heads-csv: every column of heads.csv with differing values has a heatmap with one cell per row and a colour
  scale bar from the column's minimum to its maximum (-m..m, m = the largest magnitude, when
  centred at 0); a column with one value for every head has no heatmap, and a note names it
  (role, a word per head, and the *_rows counts are not drawn);
- the examples of the run have distinct names;
- with --example: the viewer shows that example, layer and head; its data-sum (the sum of the
  bytes it drew) equals the sum of the selected head's bytes decoded here from the JSON embedded
  in REPORT.html (all heads of the layer for --head all, one canvas each; their rounded mean, one
  canvas, for --head mean), and it painted pixels;
- with --gold-csv: the viewer outlines exactly the gold cells that the dump's CSV lists (one
  rect.gold per cell), and its legend says how many;
- with --runs N: the sweep page holds N run sections and, per metric results.csv has, a
  final-metric chart whose points are results.csv's means.
- with --circuits: each activation- and path-patching grid has one cell per row of RUN's
  patching_heads.csv, patching_resid.csv and path_patching.csv, holding the CSV's values (empty
  where the CSV's is not finite); each detector's chart has a point per checkpoint for each of the
  8 heads (or all, when fewer) that score highest, its values the CSV's; the composition graph
  has, per kind, the 6 strongest pairs of composition.csv's last step as edges.
Prints one line naming the first failed check and exits 1.
"""
import argparse
import base64
import csv
import json
import re
import sys
import zlib
from html.parser import HTMLParser


class Elements(HTMLParser):
    """Every element's tag and attributes, and the text of #js-errors."""

    def __init__(self):
        super().__init__()
        self.elements, self.errors, self._in_errors = [], "", False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        self._in_errors = attrs.get("id") == "js-errors"

    def handle_endtag(self, tag):
        self._in_errors = False

    def handle_data(self, data):
        if self._in_errors:
            self.errors += data


def fail(message):
    print(f"check_report_dom: {message}", file=sys.stderr)
    sys.exit(1)


def embedded_data(report_path):
    text = open(report_path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    if not m:
        fail(f"{report_path}: no embedded report-data")
    return json.loads(m.group(1))


def head_bytes(example, layer, head):
    raw = base64.b64decode(example["heads"][layer * example["n_heads"] + head])
    if example.get("encoding") == "deflate":
        raw = zlib.decompress(raw)
    T = example["T"]
    expected = T * (T + 1) // 2 if example["causal"] else T * example.get("S", T)  # S keys: a cross map
    if len(raw) != expected:
        fail(f"example {example['name']} layer {layer} head {head}: {len(raw)} bytes, expected {expected}")
    return raw


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def check_heatmaps(dom, heads_csv):
    """One cell per head and a colour scale per varying column of heads.csv, a note for the others."""
    with open(heads_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    labels = ("layer", "head", "attention", "label")  # which head a row is, not a value
    # role is a word per head (in each cell's tip) and *_rows count a statistic's rows: no heatmaps
    not_drawn = ("role",)
    columns = [c for c in rows[0] if c not in labels + not_drawn and not c.endswith("_rows")
               and any(r[c] != "" for r in rows)]
    cells = [a for tag, a in dom.elements if tag == "rect" and "data-cell" in a]
    bars = {a["data-scale-column"]: a for tag, a in dom.elements if tag == "svg" and "data-scale-column" in a}
    constant = " ".join(a["data-constant"] for tag, a in dom.elements if "data-constant" in a).split()
    for name in columns:
        got = {(a.get("data-attention", "dec"), a["data-layer"], a["data-head"]) for a in cells
               if a["data-column"] == name}
        numbers = [float(r[name]) for r in rows if r[name] != ""]
        if min(numbers) == max(numbers):
            if got or name not in constant:
                fail(f"heatmap {name}: every head has {numbers[0]:g}, so no grid and a note; "
                     f"got {len(got)} cells and the note names {constant}")
            continue
        want = {(r.get("attention", "dec"), r["layer"], r["head"]) for r in rows}
        if got != want:
            fail(f"heatmap {name}: cells {sorted(got)}, expected one per head {sorted(want)}")
        lo, hi = min(numbers), max(numbers)
        if name.endswith("delta") or name == "positional_offset":
            hi = max(abs(lo), abs(hi))
            lo = -hi
        bar = bars.get(name)
        if bar is None or not close(float(bar["data-min"]), lo) or not close(float(bar["data-max"]), hi):
            fail(f"heatmap {name}: expected a colour scale from {lo:g} to {hi:g}, got "
                 f"{(bar['data-min'], bar['data-max']) if bar else 'none'}")
    values = [a for a in cells if a["data-value"] != ""]
    if not values:
        fail("no heatmap cell has a value")


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def finite(text):
    """A CSV cell as the page writes it into data-value: the number, or None when not finite."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def same_values(got, want):
    """Two lists of numbers-or-None equal as multisets, to close()."""
    if len(got) != len(want) or [g is None for g in sorted(got, key=lambda v: (v is None, v or 0))] != \
            [w is None for w in sorted(want, key=lambda v: (v is None, v or 0))]:
        return False
    a = sorted(v for v in got if v is not None)
    b = sorted(v for v in want if v is not None)
    return all(close(x, y) for x, y in zip(a, b))


def check_circuits(dom, run):
    """headlab circuits' files drawn: patching grids, detector curves, the composition graph."""
    cells = [a for tag, a in dom.elements if tag == "rect" and "data-grid" in a]
    grids = [("patching_heads.csv", c, c) for c in ("head_out_restored", "q_restored", "k_restored", "v_restored")]
    grids += [("patching_resid.csv", "resid_restored", "restored")]
    grids += [("path_patching.csv", "path_" + c, c) for c in ("q_restored", "k_restored", "v_restored")]
    for file, grid, column in grids:
        rows = read_rows(f"{run}/{file}")
        drawn = [a for a in cells if a["data-grid"] == grid]
        got = [float(a["data-value"]) if a["data-value"] != "" else None for a in drawn]
        if len({(a["data-row"], a["data-col"]) for a in drawn}) != len(rows) or \
                not same_values(got, [finite(r[column]) for r in rows]):
            fail(f"grid {grid}: {len(drawn)} cells, expected {file}'s {len(rows)} values of {column}")
    rows = read_rows(f"{run}/detectors.csv")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    steps = len({r["step"] for r in rows})
    for column in ("previous_token", "duplicate_token", "induction", "prefix_matching"):
        points = [float(a["data-y"]) for tag, a in dom.elements if tag == "circle" and a.get("data-chart") == f"detector {column}"]
        values = [float(r[column]) for r in rows]
        if len(points) != min(8, len(labels)) * steps or not all(any(close(p, v) for v in values) for p in points):
            fail(f"detector {column}: {len(points)} points, expected {min(8, len(labels))} heads x {steps} checkpoints "
                 f"of detectors.csv")
    rows = read_rows(f"{run}/composition.csv")
    last = max(int(r["step"]) for r in rows)
    for kind in ("q", "k", "v"):
        want = sorted((finite(r[kind]) for r in rows if int(r["step"]) == last and finite(r[kind]) is not None),
                      reverse=True)[:6]
        got = [float(a["data-value"]) for tag, a in dom.elements if tag == "path" and a.get("data-edge") == kind]
        if not same_values(got, want):
            fail(f"composition graph: {kind} edges {sorted(got)}, expected composition.csv's strongest {want}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dom")
    p.add_argument("--report", required=True)
    p.add_argument("--heads-csv")
    p.add_argument("--example")
    p.add_argument("--layer", type=int)
    p.add_argument("--head")
    p.add_argument("--runs", type=int)
    p.add_argument("--gold-csv")
    p.add_argument("--circuits")
    args = p.parse_args()

    dom = Elements()
    dom.feed(open(args.dom, encoding="utf-8").read())
    if dom.errors.strip():
        fail(f"JavaScript errors: {dom.errors.strip()}")
    if not any(tag == "body" and a.get("data-ready") == "1" for tag, a in dom.elements):
        fail("the page's script did not finish (no body data-ready=1)")

    if args.heads_csv:
        check_heatmaps(dom, args.heads_csv)
    if args.circuits:
        check_circuits(dom, args.circuits)
    data = embedded_data(args.report)
    for run in data["runs"]:
        names = [e["name"] for e in run["examples"]]
        if len(set(names)) != len(names):
            fail(f"run {run['name']}: two examples share a name: {names}")

    if args.runs is not None:
        runs = [a for tag, a in dom.elements if tag == "details" and "data-run" in a]
        if len(runs) != args.runs:
            fail(f"{len(runs)} run sections, expected {args.runs}")
        results = data["results"]
        points = [a for tag, a in dom.elements if tag == "circle" and a.get("data-chart", "").startswith("final ")]
        for metric in ("val_loss", "val_accuracy", "val_bpb"):
            means = results["columns"].index(f"{metric}_mean")
            want = sorted(r[means] for r in results["rows"] if r[means] is not None)
            got = sorted(float(a["data-y"]) for a in points if a["data-chart"] == f"final {metric}")
            if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
                fail(f"final {metric} chart: points {got}, expected results.csv's means {want}")

    if args.example is not None:
        viewers = [a for tag, a in dom.elements if tag == "div" and "data-rendered" in a]
        if not viewers:
            fail("no rendered attention viewer")
        v = viewers[0]
        shown = (v.get("data-example"), v.get("data-layer"), v.get("data-head"))
        if shown != (args.example, str(args.layer), args.head):
            fail(f"the viewer shows example, layer, head {shown}, expected {(args.example, str(args.layer), args.head)}")
        example = next((e for e in data["runs"][0]["examples"] if e["name"] == args.example), None)
        if example is None:
            fail(f"example {args.example} is not in {args.report}")
        layer_heads = range(example["layer_heads"][args.layer])
        heads = layer_heads if args.head == "all" else [args.head] if args.head == "mean" else [int(args.head)]
        if args.head == "mean":  # the page's rounding: floor(sum / n + 1/2), cell by cell
            maps = [head_bytes(example, args.layer, h) for h in layer_heads]
            total = sum((2 * sum(cell) + len(maps)) // (2 * len(maps)) for cell in zip(*maps))
        else:
            total = sum(sum(head_bytes(example, args.layer, h)) for h in heads)
        if v.get("data-sum") != str(total):
            fail(f"the viewer drew matrices summing to {v.get('data-sum')}, the selected head(s) sum to {total}")
        if v.get("data-canvases") != str(len(heads)) or v.get("data-t") != str(example["T"]):
            fail(f"the viewer drew {v.get('data-canvases')} canvases of T = {v.get('data-t')}, "
                 f"expected {len(heads)} of T = {example['T']}")
        canvases = [a for tag, a in dom.elements if tag == "canvas" and a.get("data-layer") == str(args.layer)]
        if len(canvases) != len(heads):
            fail(f"{len(canvases)} canvases of layer {args.layer} in the DOM, expected {len(heads)}")
        if int(v.get("data-painted", "0")) < example["T"]:
            fail(f"the viewer's canvas has {v.get('data-painted')} painted pixels")
        tokens = [a for tag, a in dom.elements if tag == "span" and "data-pos" in a]
        if len(tokens) != example.get("S", example["T"]):
            fail(f"{len(tokens)} tokens in the strip, expected {example.get('S', example['T'])}")

    if args.gold_csv is not None:
        with open(args.gold_csv, newline="") as f:
            want = {(r["target_position"], r["source_position"]) for r in csv.DictReader(f)}
        got = [(a["data-t"], a["data-s"]) for tag, a in dom.elements if tag == "rect" and a.get("class") == "gold"]
        if not want or len(got) != len(want) or set(got) != want:
            fail(f"the viewer outlines {len(got)} gold cells, the dump {args.gold_csv} has {len(want)}"
                 f"{'' if set(got) == want else ': different cells'}")
        legend = [a for tag, a in dom.elements if tag == "div" and "data-rendered" in a][0].get("data-gold")
        if legend != str(len(want)):
            fail(f"the viewer says it drew {legend} gold cells, expected {len(want)}")


if __name__ == "__main__":
    main()
