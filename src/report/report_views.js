// headlab report, part 3 of 3: the attention viewer, a run's and a sweep's sections, and main().
// ---- attention viewer --------------------------------------------------------------------------
// Each head's map is round(255 p), row by row (the lower triangle only when causal), compressed
// with zlib (ex.encoding "deflate") and base64-encoded. A head is decoded when first drawn (the
// browser's DecompressionStream, hence a promise) and kept as a full T x S Uint8Array: T queries
// (ex.tokens) by S keys (ex.key_tokens; S = T and the same tokens in a self-attention map, the
// source's in an encoder_decoder's cross-attention). keyCount and keyTokens read older reports too.
// The viewer shows one head, the mean of a layer's heads, or all of them; a cross map whose dump
// has a gold alignment (ex.gold) gets it drawn over the single map.
async function inflate(base64) {
  const bytes = Uint8Array.from(atob(base64), c => c.charCodeAt(0));
  if (typeof DecompressionStream === "undefined") throw new Error("this browser has no DecompressionStream: use a current one");
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
const keyCount = ex => ex.S === undefined ? ex.T : ex.S;
const keyTokens = ex => ex.key_tokens || ex.tokens;
const crossMap = ex => ex.kind === "cross";  // queries and keys from different sequences
function headMatrix(ex, layer, head) {
  const k = layer * ex.n_heads + head;
  if (ex.heads[k] === null || ex.heads[k] === undefined) return Promise.resolve(null);
  ex.decoded = ex.decoded || {};
  if (!ex.decoded[k]) ex.decoded[k] = (async () => {
    const bytes = ex.encoding === "deflate" ? await inflate(ex.heads[k]) : Uint8Array.from(atob(ex.heads[k]), c => c.charCodeAt(0));
    const T = ex.T, S = keyCount(ex), m = new Uint8Array(T * S);
    let i = 0;
    for (let t = 0; t < T; ++t) for (let s = 0, n = ex.causal ? t + 1 : S; s < n; ++s) m[t * S + s] = bytes[i++];
    if (i !== bytes.length) throw new Error(`example ${ex.name}: head ${layer}:${head} holds ${bytes.length} bytes, not ${i}`);
    return m;
  })();
  return ex.decoded[k];
}
const tokenText = s => s === " " ? "\u00a0" : s;
function drawMatrix(canvas, ex, m, cell, margin, labels) {
  const T = ex.T, S = keyCount(ex), keys = keyTokens(ex);
  canvas.width = margin + S * cell;
  canvas.height = margin + T * cell;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const image = new ImageData(S, T);
  for (let t = 0; t < T; ++t) for (let s = 0; s < S; ++s) {
    const c = ex.causal && s > t ? [236, 236, 236] : ATTENTION_LUT[m[t * S + s]], o = 4 * (t * S + s);
    image.data[o] = c[0]; image.data[o + 1] = c[1]; image.data[o + 2] = c[2]; image.data[o + 3] = 255;
  }
  const small = document.createElement("canvas");
  small.width = S; small.height = T;
  small.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, margin, margin, S * cell, T * cell);
  if (!labels) return;
  ctx.fillStyle = "#333";
  const size = Math.min(12, cell - 1), every = cell >= 8 ? 1 : Math.ceil(Math.max(T, S) / 16);
  ctx.font = (cell >= 8 ? size : 10) + "px ui-monospace, monospace";
  // Every token when the cells are big enough, else every k-th position with its token.
  const label = (tokens, t) => {
    const token = tokens[t] === " " ? "\u2423" : tokens[t];  // a visible space
    return cell >= 8 ? token.slice(0, 5) : t + " " + token.slice(0, 3);
  };
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (let t = 0; t < T; t += every) ctx.fillText(label(ex.tokens, t), margin - 3, margin + t * cell + cell / 2);  // queries down the left
  for (let s = 0; s < S; s += every) {  // keys along the top
    ctx.save(); ctx.translate(margin + s * cell + cell / 2, margin - 3); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left"; ctx.fillText(label(keys, s), 0, 0); ctx.restore();
  }
}
// The layer's mean over its heads, cell by cell, rounded as the bytes are: round(sum / n).
function meanMatrix(matrices) {
  const present = matrices.filter(m => m), n = present.length;
  if (!n) return null;
  const mean = new Uint8Array(present[0].length);
  for (let i = 0; i < mean.length; ++i) {
    let sum = 0;
    for (const m of present) sum += m[i];
    mean[i] = Math.floor((2 * sum + n) / (2 * n));
  }
  return mean;
}
// A cross map's gold alignment (ex.gold: [t, s] cells) as outlined cells in an SVG laid over the
// canvas, so that the marks are elements one can count; it lets the mouse through to the canvas.
function goldOverlay(ex, canvas, cell, margin) {
  const w = canvas.width, h = canvas.height, stroke = Math.max(1, Math.min(2, cell / 5));
  const rects = ex.gold.map(([t, s]) => `<rect class="gold" data-t="${t}" data-s="${s}" x="${margin + s * cell + stroke / 2}" ` +
    `y="${margin + t * cell + stroke / 2}" width="${cell - stroke}" height="${cell - stroke}" stroke-width="${stroke}"/>`).join("");
  const box = document.createElement("div");
  box.className = "gold-box";
  box.innerHTML = `<svg class="gold-marks" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">${rects}</svg>`;
  box.prepend(canvas);
  return box;
}
function paintedPixels(canvas) {
  const d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) n += d[i] !== 255 || d[i + 1] !== 255 || d[i + 2] !== 255;
  return n;
}

// The start of an example's text, for the example menu: bytes run together, words spaced.
function textSnippet(tokens) {
  const head = tokens.slice(0, 24), words = head.filter(w => w.length > 1 && !w.startsWith("\\")).length > head.length / 4;
  const text = head.join(words ? " " : "");
  return text.length > 22 ? text.slice(0, 21) + "\u2026" : text;
}

const VIEWERS = [];
const headChoice = v => v === "all" || v === "mean" ? v : Number(v);  // a head, its layer's mean, or all heads
function createViewer(run, ri, host) {
  const examples = run.examples, state = {example: 0, layer: 0, head: 0};
  host.innerHTML = `<div class="controls">
    <label>example <select class="ex">${examples.map((e, i) => `<option value="${i}">${esc(e.name)}: "${esc(textSnippet(e.tokens))}" (${e.T === keyCount(e) ? `${e.T} tokens` : `${e.T} x ${keyCount(e)} tokens`})</option>`).join("")}</select></label>
    <label>layer <select class="layer"></select></label>
    <label>head <select class="head"></select></label>
    <span class="small muted">attention 0 <span class="scale"></span> 1; grey: masked (future) keys. Hover a cell or a
    token for the value (to 1/255); rows are queries, columns keys; the strip shades each key by the hovered query's attention</span></div>
    <div class="view"></div><div class="gold-legend small"></div><div class="tokens"></div>`;
  const [exSel, layerSel, headSel] = ["ex", "layer", "head"].map(c => host.querySelector("select." + c));
  const view = host.querySelector(".view"), strip = host.querySelector(".tokens"), legend = host.querySelector(".gold-legend");
  host.querySelector(".scale").style.background =
    "linear-gradient(to right," + [0, 64, 128, 192, 255].map(q => rgb(ATTENTION_LUT[q])).join(",") + ")";
  let current = null;  // the single head's matrix shown, for the token strip

  function fillSelects() {
    const ex = examples[state.example];
    layerSel.innerHTML = Array.from({length: ex.n_layers}, (_, l) => `<option value="${l}">${l}</option>`).join("");
    const n = ex.layer_heads[state.layer];
    headSel.innerHTML = Array.from({length: n}, (_, h) => `<option value="${h}">${h}</option>`).join("") +
                        `<option value="mean">mean of the layer's heads</option><option value="all">all heads of the layer</option>`;
    exSel.value = state.example; layerSel.value = state.layer; headSel.value = state.head;
  }
  function showStrip(t) {
    const ex = examples[state.example];
    strip.querySelectorAll(".tok").forEach((span, s) => {
      const q = current && t !== null && (!ex.causal || s <= t) ? current[t * keyCount(ex) + s] : 0;
      span.style.background = q ? rgb(ATTENTION_LUT[q]) : "";
      span.style.color = q > 150 ? "#fff" : "";
      span.classList.toggle("query", s === t && !crossMap(ex));
      span.setAttribute("data-tip", t === null ? `position ${s}` : `query ${t} -> key ${s}: ${(q / 255).toFixed(3)}`);
    });
  }
  function tip(ex, m, t, s, head, gold) {
    const where = `layer ${state.layer}, ${head === "mean" ? "mean of its heads" : "head " + head}\n` +
                  `query ${t} "${ex.tokens[t]}" -> key ${s} "${keyTokens(ex)[s]}": `;
    return where + (ex.causal && s > t ? "masked (future)" : (m[t * keyCount(ex) + s] / 255).toFixed(3)) +
           (gold && gold.has(t * keyCount(ex) + s) ? "\ngold link: the word this query predicts and this key's word share a Strong's number" : "");
  }
  let renders = 0;  // a render started later wins over one still decoding
  async function render() {
    const ex = examples[state.example], T = ex.T, S = keyCount(ex), ticket = ++renders;
    const layerHeads = Array.from({length: ex.layer_heads[state.layer]}, (_, h) => h);
    const heads = state.head === "all" ? layerHeads : [state.head];
    const matrices = state.head === "mean" ? [meanMatrix(await Promise.all(layerHeads.map(h => headMatrix(ex, state.layer, h))))]
                                           : await Promise.all(heads.map(h => headMatrix(ex, state.layer, h)));
    if (ticket !== renders) return;
    // Gold marks on a single map (a head or the mean); the small multiples are too small for them.
    const gold = ex.gold && state.head !== "all" ? new Set(ex.gold.map(([t, s]) => t * S + s)) : null;
    view.innerHTML = "";
    let sum = 0, canvases = 0, painted = 0;
    const box = state.head === "all" ? document.createElement("div") : view;
    if (state.head === "all") { box.className = "multiples"; view.appendChild(box); }
    for (const [k, h] of heads.entries()) {
      const m = matrices[k];
      if (!m) continue;
      for (let i = 0; i < m.length; ++i) sum += m[i];
      const canvas = document.createElement("canvas");
      const single = state.head !== "all";
      const cell = single ? Math.max(2, Math.min(18, Math.floor(560 / Math.max(T, S)))) : Math.max(1, Math.floor(180 / Math.max(T, S)));
      const margin = single ? 44 : 0;
      drawMatrix(canvas, ex, m, cell, margin, single);
      if (!single && canvas.width > 190) canvas.style.width = "190px";  // a thumbnail; hover still maps to cells
      canvas.setAttribute("data-layer", state.layer);
      canvas.setAttribute("data-head", h);
      canvas.addEventListener("mousemove", e => {
        const r = canvas.getBoundingClientRect(), scale = canvas.width / r.width;
        const s = Math.floor(((e.clientX - r.left) * scale - margin) / cell);
        const t = Math.floor(((e.clientY - r.top) * scale - margin) / cell);
        if (s < 0 || t < 0 || s >= S || t >= T) { hideTip(); return; }
        showTip(tip(ex, m, t, s, h, gold), e);
        if (single) showStrip(t);
      });
      canvas.addEventListener("mouseleave", hideTip);
      if (single) {
        view.appendChild(gold ? goldOverlay(ex, canvas, cell, margin) : canvas);
        current = m;
      } else {
        const fig = document.createElement("figure");
        fig.innerHTML = `<figcaption>head ${h}</figcaption>`;
        fig.appendChild(canvas);
        fig.addEventListener("click", () => set({head: h}));
        box.appendChild(fig);
      }
      if (!canvases++) painted = paintedPixels(canvas);
    }
    if (state.head === "all") current = null;
    // The strip holds the keys; hovering one shows its row when keys are the queries too.
    strip.innerHTML = keyTokens(ex).map((s, t) => `<span class="tok" data-pos="${t}">${esc(tokenText(s))}</span>` +
                                                (s === "\\n" ? "<br>" : "")).join("");
    if (!crossMap(ex))
      strip.querySelectorAll(".tok").forEach((span, t) => span.addEventListener("mouseenter", () => showStrip(t)));
    showStrip(current ? T - 1 : null);
    legend.innerHTML = !ex.gold ? "" : `<svg width="14" height="14"><rect class="gold-key" x="1" y="1" width="12" height="12" stroke-width="2"/></svg> ` +
      `gold alignment (${ex.gold.length} cells${gold ? "" : "; choose a head or the mean to see them"}): the source ` +
      `token's word and the word the row's query predicts (the target token after the row's label) share a ` +
      `Strong's number; <code>analyze --alignment</code> scores a head on these rows`;
    Object.assign(host.dataset, {example: ex.name, layer: state.layer, head: state.head, t: T, sum, canvases, painted,
                                 gold: gold ? ex.gold.length : 0, rendered: Number(host.dataset.rendered || 0) + 1});
  }
  function set(change) {
    Object.assign(state, change);
    const ex = examples[state.example];
    state.layer = Math.min(Math.max(0, state.layer), ex.n_layers - 1);
    if (state.head !== "all" && state.head !== "mean") state.head = Math.min(Math.max(0, state.head), ex.layer_heads[state.layer] - 1);
    fillSelects();
    return render().catch(e => reportError("error: " + (e && e.stack ? e.stack : e)));
  }
  exSel.addEventListener("change", () => set({example: Number(exSel.value)}));
  layerSel.addEventListener("change", () => set({layer: Number(layerSel.value)}));
  headSel.addEventListener("change", () => set({head: headChoice(headSel.value)}));
  const viewer = {run: ri, examples, set, host, ready: set({})};
  VIEWERS.push(viewer);
  return viewer;
}

// #run=I&example=NAME&layer=L&head=H|mean|all selects a head in run I's viewer (the first run by default).
function applyHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (![...p.keys()].length) return;
  const ri = Number(p.get("run") || 0), viewer = VIEWERS.find(v => v.run === ri) || VIEWERS[0];
  if (!viewer) return;
  const change = {};
  if (p.has("example")) {
    const i = viewer.examples.findIndex(e => e.name === p.get("example"));
    change.example = i >= 0 ? i : Number(p.get("example")) || 0;
  }
  if (p.has("layer")) change.layer = Number(p.get("layer"));
  if (p.has("head")) change.head = headChoice(p.get("head"));
  return viewer.set(change);
}
window.addEventListener("hashchange", applyHash);

// ---- a run's section ---------------------------------------------------------------------------
// A few lines instead of a table: what was trained, how far it got, what built it, what files it has.
function describeModel(v) {
  const g = k => v[k], parts = [];
  const heads = Number(g("model.n_heads")), dHead = Number(g("model.d_head")) || (Number(g("model.d_model")) / heads);
  if (g("model.kind")) parts.push(g("model.kind"));
  if (g("model.d_model")) parts.push("d_model " + g("model.d_model"));
  if (heads) parts.push(heads + (heads === 1 ? " head" : " heads") + (dHead ? " x d_head " + dHead : "") +
                        (Number(g("model.n_kv_heads")) ? " (" + g("model.n_kv_heads") + " kv heads)" : ""));
  if (g("model.layer_heads") && g("model.layer_heads") !== "[]") parts.push("heads per layer " + g("model.layer_heads"));
  if (g("model.n_layers")) parts.push(g("model.n_layers") + " layers");
  const data = [g("data.task") && "task " + g("data.task"), g("data.path") && g("data.task") === "text" && g("data.path"),
                g("data.seq_len") && "seq_len " + g("data.seq_len")].filter(Boolean);
  const train = [g("train.steps") && g("train.steps") + " steps", g("train.batch_size") && "batch " + g("train.batch_size"),
                 g("train.lr") && "lr " + g("train.lr"), g("train.seed") && "seed " + g("train.seed")].filter(Boolean);
  return [parts.join(", "), data.join(", "), train.join(", ")].filter(Boolean).join("; ");
}
function runFacts(run) {
  const config = parseConfig(run.config), m = run.metrics, lines = [];
  const model = describeModel(config.values);
  if (model) lines.push(`<b>${esc(model)}</b>`);
  if (m) {
    const got = ["step " + fmt(lastValue(column(m, "step")))];
    if (hasValues(column(m, "tokens"))) got.push(fmt(lastValue(column(m, "tokens"))) + " tokens");
    const finals = ["train_loss", "val_loss", "val_accuracy", "val_bpb"].filter(n => hasValues(column(m, n)))
                     .map(n => n + " " + fmt(lastValue(column(m, n))));
    const rates = (column(m, "tokens_per_s") || []).slice(1).filter(v => typeof v === "number");
    if (rates.length) got.push(fmt(Math.round(rates.reduce((a, b) => a + b, 0) / rates.length)) + " tokens/s");
    if (hasValues(column(m, "elapsed_s"))) got.push(fmt(lastValue(column(m, "elapsed_s"))) + " s");
    lines.push(`last logged: ${esc(got.join(", "))}; final ${esc(finals.join(", "))}`);
  }
  const built = config.provenance.map(([k, v]) => k.replace(/^headlab_/, "") + " " + v).join(", ");
  if (built) lines.push(`<span class="muted">trained by headlab: ${esc(built)}</span>`);
  lines.push(`<span class="muted">${esc(run.path)}: checkpoints ${esc(run.checkpoints.join(" ") || "-")}; ` +
             `analysis ${run.heads ? "heads.csv" : "-"}; attention examples ${esc(run.examples.map(e => e.name).join(", ") || "-")}; ` +
             `prune.csv files ${run.prune.length}</span>`);
  return `<div class="facts">${lines.map(l => `<div>${l}</div>`).join("")}</div>` +
         (run.config ? `<details><summary>config.toml</summary><pre>${esc(run.config)}</pre></details>` : "");
}
// Two columns on a wide screen: everything else on the left, the attention viewer on the right,
// beside the heatmaps whose cells open a head in it.
function renderRun(run, ri, host) {
  let html = `<h3>Run</h3>${runFacts(run)}`;
  if (run.metrics) html += `<h3>Training curves</h3><div class="charts">${runCurves(run.metrics, CURVES.slice(0, 3))}</div>` +
    `<details><summary>learning rate, gradient norm, tokens per second</summary><div class="charts">` +
    `${runCurves(run.metrics, CURVES.slice(3))}</div></details>`;
  if (run.heads) html += `<h3>Per-head analysis (heads.csv)</h3>${headHeatmaps(run.heads, ri)}`;
  if (run.units) html += `<h3>FFN units (units.csv)</h3>${unitCurves(run.units)}`;
  if (run.similarity && run.similarity.rows.length)
    html += `<details class="similarity"><summary>head-by-head Jensen-Shannon distance (heads_similarity.csv; ` +
            `0 = the same attention, yellow = the largest)</summary></details>`;
  if (run.prune.length) html += `<h3>Pruning (${run.prune.length} prune.csv)</h3>${pruneCurves(run.prune)}`;
  const circuits = run.circuits ? circuitsSection(run.circuits, run.metrics) : "";
  if (circuits) html += `<h3>Circuits (headlab circuits)</h3>${circuits}`;
  if (run.examples.length)
    html = `<div class="run-grid"><div>${html}</div><div><h3>Attention</h3>` +
           `<div class="viewer" id="viewer-${ri}" data-run="${ri}"></div></div></div>`;
  host.innerHTML = html;
  const similarity = host.querySelector("details.similarity");
  if (similarity) similarity.appendChild(similarityMap(run.similarity));
  const viewerHost = host.querySelector(".viewer");
  if (viewerHost) {
    const viewer = createViewer(run, ri, viewerHost);
    // The viewer's layers are the (decoder's) self-attention's: enc and cross cells do not open it.
    host.querySelectorAll('rect.cell[data-attention="dec"]').forEach(r => r.addEventListener("click", () => {
      viewer.set({layer: Number(r.dataset.layer), head: Number(r.dataset.head)});
      viewerHost.scrollIntoView({block: "nearest"});
    }));
  }
}

// ---- a sweep -----------------------------------------------------------------------------------
function resultsTable(csv) {
  if (!csv) return "";
  return `<table class="results"><tr>${csv.columns.map(c => `<th>${esc(c)}</th>`).join("")}</tr>` +
         csv.rows.map(r => `<tr>${r.map(v => `<td>${esc(fmt(v))}</td>`).join("")}</tr>`).join("") + "</table>";
}
// The final metrics against the swept key, as headlab plot's final_<metric>.png draws them from
// results.csv: x is model.n_heads when swept, else the first numeric swept key, else the first
// (log2-spaced when the values span a factor of 4); a chart per task when data.task is swept; one
// series per value of any other swept key; error bars are the sample std over seeds.
function finalCharts(results) {
  const n = results ? results.columns.indexOf("n_seeds") : -1;
  if (n < 0) return "";
  const rows = results.rows.map(r => Object.fromEntries(results.columns.map((c, i) => [c, r[i]])));
  const distinct = k => distinctValues(rows.map(r => r[k]));
  const swept = results.columns.slice(0, n).filter(k => distinct(k).length > 1);
  const panelKey = swept.includes("data.task") ? "data.task" : null, rest = swept.filter(k => k !== panelKey);
  const numeric = k => distinct(k).every(v => typeof v === "number");
  const xKey = rest.includes("model.n_heads") ? "model.n_heads" : rest.find(numeric) || rest[0] || null;
  const styleKeys = rest.filter(k => k !== xKey), combo = r => styleKeys.map(k => `${k}=${r[k]}`).join(", ");
  const numericX = xKey !== null && numeric(xKey);
  const categories = xKey === null ? [null] : numericX ? distinct(xKey).sort((a, b) => a - b) : distinct(xKey);
  const logX = numericX && categories[0] > 0 && categories[categories.length - 1] / categories[0] >= 4;
  const at = v => numericX ? (logX ? Math.log2(v) : v) : categories.indexOf(v);
  const xTicks = categories.map(v => [at(v), v === null ? "all runs" : String(v)]);
  let out = "";
  for (const metric of ["val_loss", "val_accuracy", "val_bpb"]) {
    for (const panel of panelKey ? distinct(panelKey) : [null]) {
      const points = rows.filter(r => (panel === null || r[panelKey] === panel) && typeof r[metric + "_mean"] === "number")
                         .sort((a, b) => at(xKey === null ? null : a[xKey]) - at(xKey === null ? null : b[xKey]));
      if (!points.length) continue;
      const series = points.map(combo).filter((c, i, all) => all.indexOf(c) === i).map((c, i) => {
        const own = points.filter(r => combo(r) === c);
        return {name: c || metric, color: colorOf(i), dots: true,
                xs: own.map(r => at(xKey === null ? null : r[xKey])), ys: own.map(r => r[metric + "_mean"]),
                errs: own.map(r => r[metric + "_std"]),
                tips: own.map(r => `${xKey === null ? "all runs" : `${xKey} = ${r[xKey]}`}${c ? ", " + c : ""}\n${metric} ` +
                                   `${fmt(r[metric + "_mean"])}${typeof r[metric + "_std"] === "number" ? " ± " + fmt(r[metric + "_std"]) : ""}` +
                                   ` (${r.n_seeds} of ${r.n_runs} runs)`)};
      });
      out += lineChart({title: `final ${metric}` + (panel === null ? "" : `, ${panelKey} = ${panel}`), xLabel: xKey || "",
                        yLabel: metric, series, xTicks, mark: `final ${metric}`, width: 360, height: 240});
    }
  }
  return out ? `<h3>Final metrics${xKey ? " against " + esc(xKey) : ""} (results.csv: mean, error bars = sample std over ` +
               `seeds)</h3><div class="charts">${out}</div>` : "";
}
function renderSweep(data, host) {
  let html = `<h2>Sweep: ${data.runs.length} runs</h2>`;
  if (data.results) html += `<h3>Results (results.csv: mean and sample std over seeds)</h3>${resultsTable(data.results)}`;
  html += finalCharts(data.results);
  if (data.summary) html += `<details><summary>summary.md</summary><pre>${esc(data.summary)}</pre></details>`;
  html += `<h3>Every run's curves</h3><div class="charts">`;
  for (const metric of ["train_loss", "val_loss", "val_accuracy", "val_bpb"]) {
    const series = data.runs.filter(r => hasValues(column(r.metrics, metric))).map((r, i) => ({
      name: r.name, xs: column(r.metrics, "step"), ys: column(r.metrics, metric), color: colorOf(i), dots: metric !== "train_loss"}));
    if (series.length) html += lineChart({title: metric + " of every run", xLabel: "step", yLabel: metric, series, width: 460, height: 270});
  }
  html += `</div><h3>Runs</h3><div id="runs"></div>`;
  host.innerHTML = html;
  const runs = host.querySelector("#runs");
  data.runs.forEach((run, ri) => {
    const details = document.createElement("details");
    details.className = "run";
    details.open = ri === 0;
    details.setAttribute("data-run", run.name);
    const loss = lastValue(column(run.metrics, "val_loss"));
    details.innerHTML = `<summary>${esc(run.name)} <span class="muted">final val_loss ${fmt(loss)}</span></summary><div></div>`;
    runs.appendChild(details);
    renderRun(run, ri, details.querySelector("div"));
  });
}

// ---- the page ----------------------------------------------------------------------------------
async function main() {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const g = data.generated;
  document.getElementById("title").textContent = `headlab report: ${data.name} (${data.kind})`;
  document.getElementById("generated").textContent =
    `${g.folder}, written ${g.date} by headlab ${g.headlab_version} (commit ${g.headlab_commit}, ${g.headlab_build_type})`;
  const host = document.getElementById("report");
  if (data.kind === "sweep") renderSweep(data, host);
  else renderRun(data.runs[0], 0, host);
  // Ready once every viewer has drawn (maps decode asynchronously), the URL's choice included.
  return Promise.all(VIEWERS.map(v => v.ready).concat([applyHash()]))
    .then(() => document.body.setAttribute("data-ready", "1"));
}
try { main().catch(e => reportError("error: " + (e && e.stack ? e.stack : e))); }
catch (e) { reportError("error: " + (e && e.stack ? e.stack : e)); }
