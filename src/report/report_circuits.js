// headlab report, part 2 of 3: the circuits section, drawn from what `headlab circuits` wrote into
// the run folder (docs/circuits.md defines every number): the head detectors' scores against step
// beside the loss curve, activation patching as heatmaps (each head's output, queries, keys and
// values; the residual stream at each block and position), path patching as sender x receiver
// grids, and a graph of the strongest Q-, K- and V-composition pairs of the last checkpoint.
// Patching values are the share of the clean metric restored: 0 = as corrupted, 1 = as clean.

// The rows of a CSV (gather.cpp's {columns, rows}) as objects.
const records = csv => csv ? csv.rows.map(r => Object.fromEntries(csv.columns.map((c, i) => [c, r[i]]))) : [];

// A grid of coloured cells, rows down and columns across, centred on 0 (blue below, red above).
// cells: [{r, c, value, tip}]; a null value is grey. Each rect carries data-grid=name, data-row,
// data-col and data-value, which .ci/check_report_dom.py reads.
function gridHeatmap({name, title, rowLabels, colLabels, cells, note = ""}) {
  const nums = cells.map(x => x.value).filter(v => typeof v === "number" && isFinite(v));
  if (!nums.length) return "";
  const hi = Math.max(...nums.map(Math.abs), 1e-12), lo = -hi;
  const colour = v => diverging((v - lo) / (hi - lo));
  const cell = Math.max(6, Math.min(22, Math.floor(300 / Math.max(colLabels.length, rowLabels.length))));
  const left = 8 + 6 * Math.max(...rowLabels.map(l => String(l).length)), top = 14;
  const width = left + colLabels.length * cell, height = top + rowLabels.length * cell;
  const every = Math.ceil(colLabels.length / Math.max(1, Math.floor(colLabels.length * cell / 24)));
  let svg = `<svg width="${width}" height="${height}" font-size="9">`;
  colLabels.forEach((l, c) => {
    if (c % every === 0) svg += `<text x="${left + c * cell + cell / 2}" y="10" text-anchor="middle">${esc(l)}</text>`;
  });
  rowLabels.forEach((l, r) => {
    svg += `<text x="${left - 3}" y="${top + r * cell + cell / 2 + 3}" text-anchor="end">${esc(l)}</text>`;
  });
  for (const x of cells) {
    const has = typeof x.value === "number" && isFinite(x.value);
    svg += `<rect class="cell" data-grid="${esc(name)}" data-row="${x.r}" data-col="${x.c}" data-value="${has ? x.value : ""}" ` +
           `x="${left + x.c * cell}" y="${top + x.r * cell}" width="${cell - 1}" height="${cell - 1}" ` +
           `fill="${has ? rgb(colour(x.value)) : "#ddd"}" data-tip="${esc(x.tip + "\n" + title + " = " + fmt(x.value))}"/>`;
  }
  svg += "</svg>";
  return `<figure class="heatmap" data-grid="${esc(name)}"><figcaption title="${esc(note)}">${esc(title)}</figcaption>` +
         `${svg}${scaleBar(colour, lo, hi, width, true, name)}</figure>`;
}

// Activation patching of each head (patching_heads.csv): attention layers down (an
// encoder_decoder's named by kind: enc.L0, dec.L0, cross.L0), heads across, one grid per patched
// activation.
const PATCHED = [["head_out_restored", "head output"], ["q_restored", "queries"], ["k_restored", "keys"],
                 ["v_restored", "values"]];
function headPatching(csv) {
  const rows = records(csv);
  const kinds = distinctValues(rows.map(x => x.attention));
  const rowOf = x => kinds.length > 1 ? `${x.attention}.L${x.layer}` : "L" + x.layer;
  const sites = distinctValues(rows.map(rowOf));
  const heads = Math.max(...rows.map(x => x.head)) + 1;
  return PATCHED.filter(([column]) => csv.columns.includes(column)).map(([column, what]) => gridHeatmap({
    name: column, title: `${what} patched`, note: `patching_heads.csv ${column}`,
    rowLabels: sites, colLabels: Array.from({length: heads}, (_, h) => h),
    cells: rows.map(x => ({r: sites.indexOf(rowOf(x)), c: x.head, value: x[column], tip: `${x.label}: ${what} from the clean run`})),
  })).join("");
}
// The residual stream (patching_resid.csv): block inputs down (an encoder_decoder's encoder
// blocks over source positions, then its decoder's over target positions), positions across.
function residPatching(csv) {
  const rows = records(csv);
  const stacks = distinctValues(rows.map(x => x.stack));
  const rowOf = x => stacks.length > 1 ? `${x.stack} block ${x.layer}` : "block " + x.layer;
  const blocks = distinctValues(rows.map(rowOf));
  const T = Math.max(...rows.map(x => x.position)) + 1;
  return gridHeatmap({
    name: "resid_restored", title: "residual stream patched", note: "patching_resid.csv restored",
    rowLabels: blocks, colLabels: Array.from({length: T}, (_, t) => t),
    cells: rows.map(x => ({r: blocks.indexOf(rowOf(x)), c: x.position, value: x.restored,
                           tip: `${rowOf(x)}'s input at position ${x.position}`})),
  });
}
// Path patching (path_patching.csv): senders down, receivers across, one grid per receiving input.
function pathPatching(csv) {
  const rows = records(csv);
  const senders = distinctValues(rows.map(x => x.sender)), receivers = distinctValues(rows.map(x => x.receiver));
  return [["q_restored", "queries"], ["k_restored", "keys"], ["v_restored", "values"]].map(([column, what]) => gridHeatmap({
    name: "path_" + column, title: `sender -> receiver's ${what}`, note: `path_patching.csv ${column}`,
    rowLabels: senders, colLabels: receivers,
    cells: rows.map(x => ({r: senders.indexOf(x.sender), c: receivers.indexOf(x.receiver), value: x[column],
                           tip: `${x.sender} -> ${x.receiver} through its ${what}`})),
  })).join("");
}

// Detector scores against step (detectors.csv), a chart per detector with the heads that reach the
// highest score (at most 8), beside the validation loss and accuracy.
const DETECTORS = [["previous_token", "previous-token"], ["duplicate_token", "duplicate-token"],
                   ["induction", "induction"], ["prefix_matching", "prefix matching"]];
const DETECTOR_HEADS = 8;
function detectorCurves(csv, metrics) {
  const rows = records(csv).sort((a, b) => a.step - b.step);
  const labels = distinctValues(rows.map(x => x.label));
  let out = "";
  for (const [column, title] of DETECTORS) {
    if (!csv.columns.includes(column)) continue;
    const best = l => Math.max(...rows.filter(x => x.label === l && typeof x[column] === "number").map(x => x[column]));
    const shown = labels.slice().sort((a, b) => best(b) - best(a)).slice(0, DETECTOR_HEADS);
    const series = shown.map((l, i) => {
      const own = rows.filter(x => x.label === l);
      return {name: l, xs: own.map(x => x.step), ys: own.map(x => x[column]), color: colorOf(i), dots: true};
    });
    out += lineChart({title: `${title} score`, xLabel: "step", yLabel: "score", series, mark: "detector " + column});
  }
  if (metrics) out += runCurves(metrics, [["validation loss", ["val_loss"]], ["validation accuracy", ["val_accuracy"]]]);
  const heads = labels.length > DETECTOR_HEADS ? ` (the ${DETECTOR_HEADS} of ${labels.length} heads scoring highest at any step)` : "";
  return `<div class="small muted">scores at each checkpoint${heads}; the run's curves beside them</div><div class="charts">${out}</div>`;
}

// The composition graph (composition.csv, its last step): heads as nodes, a column per attention
// site in the order the model runs them (an encoder_decoder's encoder layers, then each decoder
// layer's self- and cross-attention), and each kind's COMPOSITION_EDGES strongest pairs as edges,
// wider for a larger score.
const COMPOSITION_EDGES = 6;
const COMPOSITION_COLOURS = {q: "#1f77b4", k: "#ff7f0e", v: "#2ca02c"};
const siteOf = label => String(label).replace(/H\d+$/, "");  // "L1"; "enc.L0", "dec.L1", "cross.L1"
function siteRank(site) {
  const m = /^(?:(enc|dec|cross)\.)?L(\d+)$/.exec(site);
  if (!m) return 0;
  const layer = Number(m[2]);
  return m[1] === "enc" ? layer - 1e6 : 2 * layer + (m[1] === "cross" ? 1 : 0);
}
function compositionGraph(csv) {
  const all = records(csv), last = Math.max(...all.map(x => x.step)), rows = all.filter(x => x.step === last);
  const node = new Map();  // label -> [site, head]
  for (const x of rows) for (const label of [x.sender, x.receiver])
    node.set(label, [siteOf(label), Number(String(label).replace(/.*H/, ""))]);
  const sites = distinctValues([...node.values()].map(n => n[0])).sort((a, b) => siteRank(a) - siteRank(b));
  const heads = Math.max(...[...node.values()].map(n => n[1])) + 1;
  const gapX = 150, gapY = Math.max(16, Math.min(30, Math.floor(360 / heads))), left = 40, top = 24;
  const at = label => [left + sites.indexOf(node.get(label)[0]) * gapX, top + node.get(label)[1] * gapY];
  const width = left * 2 + (sites.length - 1) * gapX, height = top + heads * gapY;
  let svg = `<svg width="${width}" height="${height}" font-size="10">`;
  sites.forEach((s, i) => { svg += `<text x="${left + i * gapX}" y="12" text-anchor="middle">${esc(s)}</text>`; });
  const hi = Math.max(...rows.flatMap(x => ["q", "k", "v"].map(k => x[k])).filter(v => typeof v === "number"), 1e-12);
  for (const [kind, colour] of Object.entries(COMPOSITION_COLOURS)) {
    const strongest = rows.filter(x => typeof x[kind] === "number").sort((a, b) => b[kind] - a[kind]).slice(0, COMPOSITION_EDGES);
    const bend = {q: -18, k: 0, v: 18}[kind];  // the three kinds of one pair apart
    for (const x of strongest) {
      const [x1, y1] = at(x.sender), [x2, y2] = at(x.receiver);
      svg += `<path class="pt" data-edge="${kind}" data-sender="${esc(x.sender)}" data-receiver="${esc(x.receiver)}" ` +
             `data-value="${x[kind]}" d="M${x1} ${y1}Q${(x1 + x2) / 2} ${(y1 + y2) / 2 + bend} ${x2} ${y2}" fill="none" ` +
             `stroke="${colour}" stroke-opacity="0.75" stroke-width="${(0.5 + 5 * x[kind] / hi).toFixed(2)}" ` +
             `data-tip="${esc(`${x.sender} -> ${x.receiver}\n${kind.toUpperCase()}-composition ${fmt(x[kind])}`)}"/>`;
    }
  }
  for (const [label] of node) {
    const [x, y] = at(label);
    svg += `<circle cx="${x}" cy="${y}" r="4" fill="#555"/><text x="${x - 7}" y="${y + 3}" text-anchor="end">${esc(label)}</text>`;
  }
  svg += "</svg>";
  const legend = Object.entries(COMPOSITION_COLOURS).map(([k, c]) => `<span><i style="background:${c}"></i>${k.toUpperCase()}-composition</span>`).join("");
  return `<figure class="composition" data-step="${last}"><figcaption>composition at step ${fmt(last)}: each kind's ` +
         `${COMPOSITION_EDGES} strongest pairs</figcaption>${svg}<div class="legend">${legend}</div></figure>`;
}

// The section: whatever of headlab circuits' files the run folder holds.
function circuitsSection(c, metrics) {
  let html = "";
  if (c.detectors) html += `<h4>Head detectors along training (detectors.csv)</h4>${detectorCurves(c.detectors, metrics)}`;
  const patching = (c.patching_heads ? headPatching(c.patching_heads) : "") + (c.patching_resid ? residPatching(c.patching_resid) : "");
  if (patching) html += `<h4>Activation patching (patching_heads.csv, patching_resid.csv: share of the clean metric ` +
                        `restored)</h4><div class="heatmaps">${patching}</div>`;
  if (c.path_patching) html += `<h4>Path patching (path_patching.csv: share restored)</h4><div class="heatmaps">${pathPatching(c.path_patching)}</div>`;
  if (c.composition) html += `<h4>Composition (composition.csv)</h4>${compositionGraph(c.composition)}`;
  return html;
}
