// headlab report, part 1 of 3 (src/report/report.html inlines all three): errors shown in the page,
// helpers, colour scales, tooltips and the SVG charts (curves, heatmaps, similarity, pruning).
// ---- errors land in the page, so that a headless browser's DOM dump shows them -----------------
const errorsBox = document.getElementById("js-errors");
function reportError(text) { errorsBox.textContent += text + "\n"; errorsBox.style.display = "block"; }
window.onerror = (message, source, line, column) => { reportError("error: " + message + " (line " + line + ":" + column + ")"); };
window.addEventListener("unhandledrejection", e => reportError("unhandled rejection: " + e.reason));
const consoleError = console.error.bind(console);
console.error = (...args) => { reportError("console.error: " + args.join(" ")); consoleError(...args); };

// ---- small helpers ---------------------------------------------------------------------------
// The distinct values of a list, in order of first appearance.
const distinctValues = xs => xs.filter((v, i) => xs.indexOf(v) === i);
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"}[c]));
function fmt(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return Number(v.toPrecision(4)).toExponential();
  return String(Number(v.toPrecision(4)));
}
function column(csv, name) {
  if (!csv) return null;
  const i = csv.columns.indexOf(name);
  return i < 0 ? null : csv.rows.map(r => r[i]);
}
const hasValues = xs => xs !== null && xs.some(v => typeof v === "number");
const lastValue = xs => { for (let i = (xs || []).length - 1; i >= 0; --i) if (typeof xs[i] === "number") return xs[i]; return null; };
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const colorOf = i => i < PALETTE.length ? PALETTE[i] : "hsl(" + Math.round(i * 137.5 % 360) + ",60%,45%)";

// config.toml: "[section]" and "key = value" lines, and the provenance comment lines heading it.
function parseConfig(text) {
  const values = {}, provenance = [];
  let section = "";
  for (const raw of (text || "").split("\n")) {
    const line = raw.trim();
    let m = line.match(/^#\s*(headlab_\w+|blis_kernels)\s*=\s*"?([^"]*)"?/);
    if (m) { provenance.push([m[1], m[2]]); continue; }
    if (line.startsWith("#") || !line) continue;
    m = line.match(/^\[([^\]]+)\]$/);
    if (m) { section = m[1] + "."; continue; }
    m = line.match(/^([\w.]+)\s*=\s*(.*)$/);
    if (m) values[section + m[1]] = m[2].replace(/\s+#.*$/, "").replace(/^"(.*)"$/, "$1");
  }
  return {values, provenance};
}

// ---- colour scales ---------------------------------------------------------------------------
function ramp(stops) {
  return x => {
    x = Math.min(1, Math.max(0, x)) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
  };
}
const viridis = ramp([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]);
const diverging = ramp([[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]]);
const attentionRamp = ramp([[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]]);
const ATTENTION_LUT = Array.from({length: 256}, (_, q) => attentionRamp(q / 255));
const rgb = c => "rgb(" + c.join(",") + ")";

// ---- tooltip: any element with data-tip, and canvases that call showTip ------------------------
const tooltip = document.getElementById("tooltip");
function showTip(text, event) {
  tooltip.textContent = text;
  tooltip.style.display = "block";
  const x = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 4);
  tooltip.style.left = x + "px";
  tooltip.style.top = (event.clientY + 14) + "px";
}
const hideTip = () => { tooltip.style.display = "none"; };
document.addEventListener("mousemove", e => {
  if (e.target.tagName === "CANVAS") return;
  const el = e.target.closest ? e.target.closest("[data-tip]") : null;
  if (el) showTip(el.getAttribute("data-tip"), e); else hideTip();
});

// ---- line charts (SVG markup) ----------------------------------------------------------------
function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(k => k * mag).find(s => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return {lo, hi, ticks};
}
// series: [{name, xs, ys, color, dash, dots, errs, tips}]; points with a null x or y are left out.
// errs: error bars (y ± err); tips: a tooltip per point. xTicks: [[x, label], ...] instead of
// round numbers (categories, or log-spaced values); the circles of a chart with a mark carry
// data-chart=mark and data-y (the browser test reads them).
function lineChart({title, xLabel, yLabel, series, width = 320, height = 210, xTicks = null, mark = null}) {
  const pad = {l: 52, r: 18, t: 8, b: 34};
  const pts = series.map(s => s.xs.map((x, i) => [x, s.ys[i], typeof (s.errs || [])[i] === "number" ? s.errs[i] : 0, (s.tips || [])[i]])
    .filter(p => typeof p[0] === "number" && typeof p[1] === "number"));
  const all = pts.flat();
  if (!all.length) return "";
  let X;
  if (xTicks) {
    const at = xTicks.map(t => t[0]), lo = Math.min(...at), hi = Math.max(...at), margin = (hi - lo) * 0.08 || 0.5;
    X = {lo: lo - margin, hi: hi + margin, ticks: at};
  } else {
    X = niceTicks(Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0])), 5);
  }
  const xLabelOf = new Map((xTicks || []).map(t => [t[0], t[1]]));
  let yLo = Math.min(...all.map(p => p[1] - p[2])), yHi = Math.max(...all.map(p => p[1] + p[2]));
  if (all.some(p => p[2] > 0)) { const margin = (yHi - yLo) * 0.05; yLo -= margin; yHi += margin; }  // caps inside the frame
  const Y = niceTicks(yLo, yHi, 5);
  const w = width - pad.l - pad.r, h = height - pad.t - pad.b;
  const sx = x => pad.l + (x - X.lo) / (X.hi - X.lo) * w, sy = y => pad.t + h - (y - Y.lo) / (Y.hi - Y.lo) * h;
  let svg = `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-size="10">`;
  for (const t of Y.ticks) svg += `<line x1="${pad.l}" x2="${pad.l + w}" y1="${sy(t)}" y2="${sy(t)}" stroke="#eee"/>` +
    `<text x="${pad.l - 4}" y="${sy(t) + 3}" text-anchor="end">${fmt(t)}</text>`;
  for (const t of X.ticks) svg += `<line x1="${sx(t)}" x2="${sx(t)}" y1="${pad.t}" y2="${pad.t + h}" stroke="#f3f3f3"/>` +
    `<text x="${sx(t)}" y="${pad.t + h + 12}" text-anchor="middle">${esc(xLabelOf.has(t) ? xLabelOf.get(t) : fmt(t))}</text>`;
  svg += `<rect x="${pad.l}" y="${pad.t}" width="${w}" height="${h}" fill="none" stroke="#999"/>`;
  svg += `<text x="${pad.l + w / 2}" y="${height - 4}" text-anchor="middle" font-size="11">${esc(xLabel)}</text>`;
  svg += `<text transform="translate(12 ${pad.t + h / 2}) rotate(-90)" text-anchor="middle" font-size="11">${esc(yLabel)}</text>`;
  series.forEach((s, k) => {
    const p = pts[k];
    if (!p.length) return;
    svg += `<path d="${p.map((q, i) => (i ? "L" : "M") + sx(q[0]).toFixed(1) + " " + sy(q[1]).toFixed(1)).join("")}" fill="none" ` +
           `stroke="${s.color}" stroke-width="1.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ""}/>`;
    for (const [x, y, e] of p) if (e > 0) {
      const cx = sx(x), top = sy(y + e).toFixed(1), bottom = sy(y - e).toFixed(1), cap = (cx - 4).toFixed(1);
      svg += `<path d="M${cx.toFixed(1)} ${top}V${bottom}M${cap} ${top}h8M${cap} ${bottom}h8" stroke="${s.color}" fill="none"/>`;
    }
    const every = Math.max(1, Math.ceil(p.length / 150));  // hover targets: at most ~150 per series
    p.forEach((q, i) => {
      if (i % every && i !== p.length - 1) return;
      const tip = q[3] || s.name + "\n" + xLabel + " " + fmt(q[0]) + ": " + yLabel + " " + fmt(q[1]);
      svg += `<circle class="pt" cx="${sx(q[0]).toFixed(1)}" cy="${sy(q[1]).toFixed(1)}" r="${s.dots ? 2.5 : 3}" ` +
             `fill="${s.dots ? s.color : "transparent"}"${mark ? ` data-chart="${esc(mark)}" data-y="${q[1]}"` : ""} data-tip="${esc(tip)}"/>`;
    });
  });
  svg += "</svg>";
  const legend = series.length > 1 ? `<div class="legend">${series.map(s =>
    `<span><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join("")}</div>` : "";
  return `<figure class="chart" data-chart="${esc(title)}"><figcaption>${esc(title)}</figcaption>${svg}${legend}</figure>`;
}

// ---- training curves -------------------------------------------------------------------------
const CURVES = [
  ["loss (nats/token)", ["train_loss", "val_loss"]],
  ["validation accuracy", ["val_accuracy"]],
  ["validation bits per byte", ["val_bpb"]],
  ["validation BLEU (greedy)", ["val_bleu"]],
  ["learning rate", ["lr"]],
  ["gradient norm", ["grad_norm"]],
  ["tokens per second", ["tokens_per_s"]],
];
function runCurves(metrics, curves) {
  const step = column(metrics, "step");
  return curves.map(([title, names]) => lineChart({
    title, xLabel: "step", yLabel: title.replace(/ \(.*/, ""),
    series: names.filter(n => hasValues(column(metrics, n))).map((n, i) => ({
      name: n, xs: step, ys: column(metrics, n), color: colorOf(i), dots: n.startsWith("val_")})),
  })).join("");
}

// ---- per-head heatmaps (heads.csv) -----------------------------------------------------------
const HEAD_COLUMNS = {  // as src/plot/headlab_plot.py and docs/analysis.md describe them
  gate: "gate value (0 = pruned)",
  importance: "importance E|dL/dgate| (nats)",
  importance_normalized: "importance / l2 norm of the layer's importances",
  ablation_loss_delta: "loss with the head masked - loss (nats/token)",
  ablation_accuracy_delta: "accuracy with the head masked - accuracy",
  layer_only_loss_delta: "loss with the head alone in its layer - loss",
  layer_only_accuracy_delta: "accuracy with the head alone in its layer - accuracy",
  entropy: "attention entropy (nats)",
  distance: "attention distance sum_s A[t,s] |t-s| (tokens)",
  confidence: "mean max_s A[t,s]",
  delimiter_mass: "attention on delimiters",
  previous_token_agreement: "fraction of rows whose argmax is t-1",
  positional_offset: "most frequent t - argmax",
  positional_share: "fraction of rows whose argmax is at the positional offset",
  syntactic_head_agreement: "fraction of rows whose argmax is the gold head",
  dependent_agreement: "fraction of rows whose argmax is a gold dependent",
  antecedent_agreement: "fraction of rows whose argmax is the gold antecedent",
  delimiter_agreement: "fraction of rows whose argmax is a delimiter",
  rare_token_agreement: "fraction of rows whose argmax is the rarest visible token",
  js_nearest: "JS distance to the nearest other head",
  alignment_aer: "alignment error rate against the Strong's gold (cross heads)",
  alignment_precision: "alignment precision against the Strong's gold",
  alignment_recall: "alignment recall against the Strong's gold",
};
// The colour legend under a heatmap: the scale as a bar of 40 steps (not an SVG gradient, which
// would be referred to by URL, and the page has none), its ends written, and 0 when centred.
function scaleBar(colour, lo, hi, width, centred, name) {
  const w = Math.max(width, 110) - 2, steps = 40;
  let ends = [fmt(lo), fmt(hi)];  // to 4 digits, or as many as it takes to tell them apart
  if (ends[0] === ends[1]) ends = [lo, hi].map(v => String(Number(v.toPrecision(8))));
  let bar = "";
  for (let i = 0; i < steps; ++i)
    bar += `<rect x="${(1 + i * w / steps).toFixed(1)}" y="1" width="${(w / steps + 0.5).toFixed(1)}" height="9" ` +
           `fill="${rgb(colour(lo + (i + 0.5) / steps * (hi - lo)))}"/>`;
  return `<svg class="scale-bar" data-scale-column="${esc(name)}" data-min="${lo}" data-max="${hi}" width="${w + 2}" height="26" font-size="9">` +
    `${bar}<rect x="1" y="1" width="${w}" height="9" fill="none" stroke="#ccc"/>` +
    `<text x="1" y="21">${ends[0]}</text><text x="${w + 1}" y="21" text-anchor="end">${ends[1]}</text>` +
    (centred ? `<text x="${1 + w / 2}" y="21" text-anchor="middle">0</text>` : "") + "</svg>";
}
function headHeatmaps(heads, ri) {
  const layers = column(heads, "layer"), headIds = column(heads, "head");
  if (!layers || !headIds) return "";
  // A row per attention site: a model's layers, or an encoder_decoder's grouped by kind (enc,
  // dec, cross: the attention column), each kind's layers in order.
  const kinds = column(heads, "attention") || layers.map(() => "dec");
  const kindOrder = k => ["enc", "dec", "cross"].indexOf(k);
  const siteKey = i => `${kinds[i]}.L${layers[i]}`;
  const rowSites = [];  // [kind, layer] of each site
  layers.forEach((l, i) => { if (!rowSites.some(([k, m]) => k === kinds[i] && m === l)) rowSites.push([kinds[i], l]); });
  rowSites.sort((a, b) => kindOrder(a[0]) - kindOrder(b[0]) || a[1] - b[1]);
  const sites = rowSites.map(([k, l]) => `${k}.L${l}`);
  const byKind = new Set(kinds).size > 1;
  const L = sites.length, H = Math.max(...headIds) + 1;
  const cell = Math.max(10, Math.min(24, Math.floor(190 / H))), left = byKind ? 44 : 24, top = 14;
  let out = "";
  const constant = [];  // columns with one value for every head: a grid of one colour says nothing
  const roles = column(heads, "role");  // Voita et al.'s roles, a word per head: in each cell's tip
  for (const name of heads.columns) {
    // Not per-head measures: the names, and the rows an agreement counted (a data property).
    if (["layer", "head", "role", "attention", "label"].includes(name) || name.endsWith("_rows")) continue;
    const values = column(heads, name);
    if (!hasValues(values)) continue;
    const nums = values.filter(v => typeof v === "number");
    let lo = Math.min(...nums), hi = Math.max(...nums);
    if (lo === hi) { constant.push([name, lo]); continue; }
    const centred = /delta$|^positional_offset$/.test(name);
    if (centred) { hi = Math.max(Math.abs(lo), Math.abs(hi)); lo = -hi; }
    const colour = v => (centred ? diverging : viridis)((v - lo) / (hi - lo));
    const width = left + H * cell, height = top + L * cell;
    let svg = `<svg width="${width}" height="${height}" font-size="9">`;
    for (let h = 0; h < H; h += cell >= 14 ? 1 : 4) svg += `<text x="${left + h * cell + cell / 2}" y="10" text-anchor="middle">${h}</text>`;
    sites.forEach((site, r) => {
      svg += `<text x="${left - 3}" y="${top + r * cell + cell / 2 + 3}" text-anchor="end">${esc(byKind ? site : site.replace(/^dec\./, ""))}</text>`;
    });
    values.forEach((v, i) => {
      const l = layers[i], h = headIds[i], r = sites.indexOf(siteKey(i)), has = typeof v === "number";
      const role = roles && typeof roles[i] === "string" && roles[i] ? ` (${roles[i]})` : "";
      const where = (byKind ? `${kinds[i]} layer ${l}, head ${h}` : `layer ${l}, head ${h}`) + role;
      svg += `<rect class="cell" data-cell="" data-run="${ri}" data-column="${esc(name)}" data-attention="${esc(kinds[i])}" ` +
             `data-layer="${l}" data-head="${h}" ` +
             `data-value="${has ? v : ""}" x="${left + h * cell}" y="${top + r * cell}" width="${cell - 1}" height="${cell - 1}" ` +
             `fill="${has ? rgb(colour(v)) : "#ddd"}" data-tip="${esc(`${where}\n${name} = ${fmt(v)}`)}"/>`;
    });
    svg += "</svg>";
    out += `<figure class="heatmap" data-column="${esc(name)}"><figcaption title="${esc(HEAD_COLUMNS[name] || name)}">${esc(name)}</figcaption>` +
           `${svg}${scaleBar(colour, lo, hi, width, centred, name)}</figure>`;
  }
  const same = constant.length ? `<div class="small muted" data-constant="${esc(constant.map(c => c[0]).join(" "))}">` +
    `the same for every head, so no grid: ${esc(constant.map(([n, v]) => n === "gate" && v === 1 ? "all gates 1" : `${n} ${fmt(v)}`).join(", "))}</div>` : "";
  const rows = byKind ? "sites down (each kind's layers: enc, dec, cross)" : "layers down";
  return out || same ? `<div class="small muted">${rows}, heads across; hover for the value, click to view the head's attention</div>` +
                       `<div class="heatmaps">${out}</div>${same}` : "";
}

// ---- head-by-head similarity (heads_similarity.csv): JS distance of heads' attention rows --------
function similarityMap(sim) {
  const n = sim.rows.length, cell = Math.max(2, Math.min(16, Math.floor(320 / n))), margin = 36;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = margin + n * cell;
  canvas.className = "similarity";
  const ctx = canvas.getContext("2d"), values = sim.rows.map(r => r.slice(1));
  const hi = Math.max(...values.flat().filter(v => typeof v === "number"), 1e-12);
  values.forEach((row, i) => row.forEach((v, j) => {
    ctx.fillStyle = typeof v === "number" ? rgb(viridis(v / hi)) : "#ddd";
    ctx.fillRect(margin + j * cell, margin + i * cell, cell, cell);
  }));
  ctx.fillStyle = "#333";
  ctx.font = "9px sans-serif";
  const every = Math.ceil(n / 16);
  for (let i = 0; i < n; i += every) {
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(sim.rows[i][0], margin - 2, margin + i * cell + cell / 2);
    ctx.save(); ctx.translate(margin + i * cell + cell / 2, margin - 2); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left"; ctx.fillText(sim.rows[i][0], 0, 0); ctx.restore();
  }
  canvas.addEventListener("mousemove", e => {
    const r = canvas.getBoundingClientRect();
    const j = Math.floor((e.clientX - r.left - margin) / cell), i = Math.floor((e.clientY - r.top - margin) / cell);
    if (i < 0 || j < 0 || i >= n || j >= n) { hideTip(); return; }
    showTip(`${sim.rows[i][0]} vs ${sim.rows[j][0]}: JS distance ${fmt(values[i][j])}`, e);
  });
  canvas.addEventListener("mouseleave", hideTip);
  return canvas;
}

// ---- FFN units (units.csv of headlab analyze --ffn) ----------------------------------------------
// Per score, one curve per MLP block: its units' scores sorted high to low against their rank, so
// blocks compare by how many of their units carry the score. Units gated off are left out.
function unitCurves(units) {
  let out = "";
  const labels = column(units, "label"), gates = column(units, "gate");
  const blocks = [...new Set(labels)];
  for (const score of ["importance_normalized", "magnitude", "integrated_gradients"]) {
    const values = column(units, score);
    if (!hasValues(values)) continue;
    const series = blocks.map((b, i) => {
      const ys = values.filter((v, k) => labels[k] === b && gates[k] !== 0 && typeof v === "number").sort((x, y) => y - x);
      return {name: String(b), xs: ys.map((_, r) => r), ys, color: colorOf(i), dots: false};
    });
    out += lineChart({title: `${score} of the FFN units per block, sorted`, xLabel: "unit rank in its block",
                      yLabel: score, series});
  }
  return out ? `<div class="charts">${out}</div>` : "";
}

// ---- pruning curves (prune/*/prune.csv) --------------------------------------------------------
// What a prune.csv pruned, by its unit column (files before it existed pruned heads), in words;
// each unit gets its own charts, its x the fraction of that unit (of the tables, for whole ones).
const PRUNE_UNITS = {heads: "heads", ffn: "FFN units", attention_layers: "whole attention layers",
                     ffn_blocks: "whole FFN blocks"};
const pruneUnit = p => { const u = column(p.csv, "unit"); return (u && u[0]) || "heads"; };
function pruneCurves(prune) {
  let out = "";
  for (const [unit, words] of Object.entries(PRUNE_UNITS)) {
    const runs = prune.filter(p => pruneUnit(p) === unit);
    for (const metric of ["val_loss", "val_accuracy", "val_bpb", "val_bleu", "val_chrf"]) {  // BLEU, chrF: translation
      const series = runs.filter(p => hasValues(column(p.csv, metric))).map((p, i) => {
        const order = column(p.csv, "round").map((r, k) => [r, k]).sort((a, b) => a[0] - b[0]).map(a => a[1]);
        const pick = name => order.map(k => column(p.csv, name)[k]);
        return {name: p.name, xs: pick("fraction_pruned"), ys: pick(metric), color: colorOf(i), dots: true};
      });
      if (series.length)
        out += lineChart({title: `${metric} as ${words} are pruned`, xLabel: `fraction of ${words} pruned`, yLabel: metric,
                          series});
    }
  }
  return out ? `<div class="charts">${out}</div>` : "";
}
