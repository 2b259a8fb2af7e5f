// The perfmodel page: builds a request from the form, calls /v1/predict and /v1/sweep, and draws
// each interval as an inline SVG bar. No libraries, no build step. Numbers are shown as the API's
// `display` strings (the CLI's own formats); in YAML mode /v1/config gives the placeholders.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const SWEEP_BATCHES = [1, 2, 4, 8, 16, 32, 64];
const RUN_FIELDS = ["gpu", "num_gpus", "precision", "micro_batch_size", "seq_len", "tokens", "rows", "dataset"];
const CATALOG_DEFAULTS = { gpu: "A100-80GB", num_gpus: "1", precision: "bf16", micro_batch_size: "2", seq_len: "2048", tokens: "1B", rows: "", dataset: "" };
let readsDatasets = false;

async function getJSON(url, options) {
  const response = await fetch(url, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const message = body && body.error ? body.error : `HTTP ${response.status}`;
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return body;
}

function parseAmount(text) {
  const m = String(text).trim().replace(/,/g, "").match(/^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kKmMbBtT]?)$/);
  if (!m) return null;
  const scale = { "": 1, k: 1e3, m: 1e6, b: 1e9, t: 1e12 }[m[2].toLowerCase()];
  return parseFloat(m[1]) * scale;
}

function intOrNull(id) {
  const text = $(id).value.trim();
  return text === "" ? null : Number(text);
}

function mode() {
  return document.querySelector("input[name=mode]:checked").value;
}

function buildRequest() {
  const tokensText = $("tokens").value.trim();
  const tokens = tokensText === "" ? null : parseAmount(tokensText);
  if (tokensText !== "" && tokens === null) throw new Error(`training tokens: cannot read ${JSON.stringify(tokensText)} (write e.g. 500M, 2B or 1e9)`);
  const body = {};
  if (mode() === "yaml") {
    // Only what the user filled in: an empty field keeps the config's value (its placeholder).
    body.config = $("yaml").value;
    const set = {};
    if ($("precision").value) set["training.precision"] = $("precision").value;
    if (intOrNull("micro_batch_size") !== null) set["training.micro_batch_size"] = intOrNull("micro_batch_size");
    if (intOrNull("seq_len") !== null) set["training.seq_len"] = intOrNull("seq_len");
    if (Object.keys(set).length) body.set = set;
    if ($("gpu").value) body.gpu = $("gpu").value;
    if (intOrNull("num_gpus") !== null) body.num_gpus = intOrNull("num_gpus");
    if (tokens !== null) body.tokens = tokens;
    if (intOrNull("rows") !== null) body.rows = intOrNull("rows");
    if ($("dataset").value.trim()) body.dataset = $("dataset").value.trim();
    return body;
  }
  const training = { seq_len: intOrNull("seq_len") || 2048, micro_batch_size: intOrNull("micro_batch_size") || 1 };
  if ($("precision").value) training.precision = $("precision").value;
  if (tokens !== null) training.tokens = tokens;
  if ($("method").value !== "full") training.lora_r = 16;
  // q, v (PEFT's default); the other LoRA choices leave it to the recipe (hf-eager: every linear layer)
  if ($("method").value === "lora") training.lora_target_modules = 2;
  if ($("method").value === "qlora") training.quantization_bits = 4;
  const gpus = intOrNull("num_gpus") || 1;
  body.config = {
    model: { name: $("model").value },
    training: training,
    hardware: { gpu: $("gpu").value || "A100-80GB", num_gpus: gpus, strategy: gpus > 1 ? "fsdp" : "ddp" },
  };
  return body;
}

// --- YAML mode: the config's values as placeholders -------------------------------------------

function setMode(yaml) {
  $("catalog-fields").hidden = yaml;
  $("yaml-fields").hidden = !yaml;
  $("data-fields").hidden = !yaml;
  for (const id of RUN_FIELDS) {
    $(id).value = yaml ? "" : CATALOG_DEFAULTS[id];
    $(id).placeholder = "";
  }
  $("gpu").options[0].text = yaml ? "(config's)" : "A100-80GB (default)";
  $("precision").options[0].text = "(config's)";
  $("dataset").disabled = !readsDatasets;
  $("dataset").placeholder = readsDatasets ? "a file in the server's data folder" : "(this server reads no files: give rows)";
  if (yaml) readConfig();
}

let configTimer = null;
let configAsked = 0;

async function readConfig() {
  const text = $("yaml").value;
  const asked = ++configAsked;
  const note = $("config-note");
  if (!text.trim()) { note.hidden = true; return; }
  try {
    const info = await getJSON("/v1/config", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ config: text }) });
    if (asked !== configAsked || mode() !== "yaml") return;  // a newer text, or the mode changed
    const shown = info.shown;
    for (const id of ["num_gpus", "micro_batch_size", "seq_len", "tokens", "rows"]) {
      $(id).placeholder = shown[id] === null || shown[id] === undefined ? (id === "rows" && info.dialect === "ludwig" ? "required (or tokens)" : "") : String(shown[id]);
    }
    $("gpu").options[0].text = shown.gpu ? `(config's: ${shown.gpu})` : "(config's)";
    $("precision").options[0].text = shown.precision ? `(config's: ${shown.precision})` : "(config's)";
    $("data-fields").dataset.dialect = info.dialect;
    note.textContent = `${info.dialect === "ludwig" ? "Ludwig" : "native"} config` + (info.error ? `: ${info.error}` : "");
    note.hidden = false;
    document.body.dataset.configRead = String(asked);
  } catch (error) {
    if (asked !== configAsked) return;
    note.textContent = error.message;
    note.hidden = false;
    document.body.dataset.configRead = String(asked);
  }
}

// --- formatting: the API's display strings are the CLI's; these only label axes ---------------

const number = (x, digits = 3) => (!isFinite(x) ? "-" : Number(x.toPrecision(digits)).toLocaleString("en-US"));

// --- drawing ----------------------------------------------------------------------------------

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function intervalBar(iv, limitLabel, limit) {
  const width = 280, height = 34, left = 4, right = width - 4;
  const top = Math.max(iv.high, limit || 0) * 1.08 || 1;
  const x = (v) => left + (right - left) * (v / top);
  const svg = el("svg", { width: width, height: height, viewBox: `0 0 ${width} ${height}`, class: "bar", role: "img" });
  el("rect", { x: left, y: 10, width: right - left, height: 8, rx: 4, fill: "#e4e7eb" }, svg);
  el("rect", { class: "band", x: x(iv.low), y: 8, width: Math.max(2, x(iv.high) - x(iv.low)), height: 12, rx: 3, fill: "var(--band)" }, svg);
  el("rect", { class: "tick", x: x(iv.estimate) - 1.5, y: 4, width: 3, height: 20, fill: "var(--tick)" }, svg);
  if (limit) {
    el("line", { class: "limit", x1: x(limit), x2: x(limit), y1: 2, y2: 26, stroke: "var(--bad)", "stroke-dasharray": "3 2" }, svg);
    el("text", { x: right, y: 33, "text-anchor": "end" }, svg).textContent = `capacity ${limitLabel}`;
  }
  el("text", { x: left, y: 33 }, svg).textContent = "0";
  return svg;
}

function card(key, title, iv, shown, options = {}) {
  const div = document.createElement("div");
  div.className = "card" + (options.bad ? " bad" : "");
  div.dataset.metric = key;
  div.dataset.estimate = String(iv.estimate);
  div.dataset.low = String(iv.low);
  div.dataset.high = String(iv.high);
  div.innerHTML = `<h3></h3><div class="value"></div><div class="range"></div>`;
  div.querySelector("h3").textContent = title;
  div.querySelector(".value").textContent = shown.value + (options.suffix || "");
  div.querySelector(".range").textContent = shown.range;
  div.appendChild(intervalBar(iv, options.limitLabel, options.limit));
  return div;
}

function clearResults() {
  $("error").hidden = true;
  $("error").textContent = "";
  for (const id of ["facts", "cards", "warnings", "fit-suggestions", "sweep"]) $(id).textContent = "";
  $("fit").hidden = true;
  $("sweep-title").hidden = true;
}

function fact(key, label, value, range) {
  const dt = document.createElement("dt");
  dt.textContent = label;
  const dd = document.createElement("dd");
  dd.dataset.key = key;
  dd.textContent = range ? `${value} (${range})` : value;
  $("facts").append(dt, dd);
}

function renderPrediction(p) {
  const d = p.display;
  const cards = $("cards");
  const level = Math.round(p.confidence_level * 100);
  if (d.steps) fact("steps", "Steps", d.steps);
  if (d.step_time) fact("step_time", "Step time", d.step_time, d.step_time_range);
  if (d.mfu) fact("mfu", "MFU", d.mfu, d.mfu_range);
  if (d.bottleneck) fact("bottleneck", "Bottleneck", d.bottleneck);
  if (d.memory_verdict) fact("memory_verdict", "Memory", d.memory_verdict);
  cards.appendChild(card("total_time_s", `Total time (${level}% interval)`, p.total_time_s, { value: d.total_time, range: d.total_time_range }));
  cards.appendChild(card("gpu_hours", "GPU-hours", p.gpu_hours, { value: d.gpu_hours, range: d.gpu_hours_range }));
  if (p.cost_usd) cards.appendChild(card("cost_usd", "Cost (USD)", p.cost_usd, { value: d.cost, range: d.cost_range }));
  const verdict = p.memory_verdict ? p.memory_verdict.verdict : p.fits_in_memory ? "fits" : "does not fit";
  cards.appendChild(card("peak_memory_gb", "Peak memory per GPU", p.peak_memory_gb, { value: d.peak_memory, range: d.peak_memory_range }, {
    limit: p.memory_capacity_gb || null, limitLabel: p.memory_capacity_gb ? `${p.memory_capacity_gb} GB` : "",
    // the one fit verdict (fits / tight / does not fit), as the Memory line and the CLI say it
    bad: verdict === "does not fit", suffix: ` (${verdict})`,
  }));
  const rate = p.throughput_tokens_per_s || p.throughput_samples_per_s;
  cards.appendChild(card("throughput", p.throughput_tokens_per_s ? "Throughput (tokens/s)" : "Throughput (samples/s)", rate, { value: d.throughput, range: d.throughput_range }));
  const warnings = $("warnings");
  for (const w of p.warnings || []) {
    const li = document.createElement("li");
    li.textContent = w;
    warnings.appendChild(li);
  }
  const list = $("fit-suggestions");
  for (const s of d.fit_suggestions || []) {
    const li = document.createElement("li");
    li.className = "fit-suggestion";
    const summary = document.createElement("div");
    summary.textContent = s.summary + (s.total_time ? ` — total ${s.total_time} (${s.total_time_range})` : "") + (s.peak_memory ? `, peak ${s.peak_memory}` : "");
    const keys = document.createElement("code");
    keys.className = "config-keys";
    keys.textContent = s.set;
    li.append(summary, keys);
    list.appendChild(li);
  }
  $("fit").hidden = !(d.fit_suggestions || []).length;
}

function renderSweep(points) {
  const box = $("sweep");
  box.textContent = "";
  const usable = points.filter((p) => p.rate);
  if (!usable.length) return;
  $("sweep-title").hidden = false;
  const width = 640, height = 270, pad = { l: 70, r: 16, t: 26, b: 40 };
  const xs = usable.map((p) => Math.log2(p.batch));
  const xmin = Math.min(...xs), xmax = Math.max(...xs) || 1;
  const ymax = Math.max(...usable.map((p) => p.rate.high)) * 1.08;
  const X = (b) => pad.l + (width - pad.l - pad.r) * ((Math.log2(b) - xmin) / ((xmax - xmin) || 1));
  const Y = (v) => height - pad.b - (height - pad.t - pad.b) * (v / ymax);
  const svg = el("svg", { width: width, height: height, viewBox: `0 0 ${width} ${height}`, role: "img", id: "sweep-chart" });
  el("line", { x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b, stroke: "#9aa5b1" }, svg);
  el("line", { x1: pad.l, x2: pad.l, y1: pad.t, y2: height - pad.b, stroke: "#9aa5b1" }, svg);
  for (let i = 0; i <= 4; i++) {
    const v = (ymax / 4) * i;
    el("text", { x: pad.l - 6, y: Y(v) + 4, "text-anchor": "end" }, svg).textContent = number(v, 2);
  }
  const band = usable.map((p) => `${X(p.batch)},${Y(p.rate.high)}`).concat(
    usable.slice().reverse().map((p) => `${X(p.batch)},${Y(p.rate.low)}`));
  el("polygon", { class: "sweep-band", points: band.join(" "), fill: "var(--band)", opacity: 0.5 }, svg);
  el("polyline", { class: "sweep-line", points: usable.map((p) => `${X(p.batch)},${Y(p.rate.estimate)}`).join(" "),
    fill: "none", stroke: "var(--tick)", "stroke-width": 2 }, svg);
  for (const p of points) {
    const x = X(p.batch);
    el("text", { x: x, y: height - pad.b + 16, "text-anchor": "middle" }, svg).textContent = String(p.batch);
    if (!p.rate) continue;
    const dot = el("circle", { class: (p.fits ? "sweep-point" : "sweep-point no-fit") + (p.adjusted ? " adjusted" : ""),
      cx: x, cy: Y(p.rate.estimate), r: 4, fill: p.fits ? "var(--tick)" : "#fff",
      stroke: p.fits ? "var(--tick)" : "var(--bad)", "stroke-width": 2 }, svg);
    if (p.adjusted) el("title", {}, dot).textContent = p.adjusted;
  }
  el("text", { x: (width + pad.l) / 2, y: height - 6, "text-anchor": "middle" }, svg).textContent =
    "micro-batch size (hollow red: does not fit in memory)";
  el("text", { x: pad.l, y: 12 }, svg).textContent = `throughput, ${usable[0].unit} (band: interval)`;
  box.appendChild(svg);
  // points the sweep moved onto its physics lines (perfmodel/decide/physics.py) say why, as the CLI does
  const moved = usable.filter((p) => p.adjusted);
  if (moved.length) {
    const notes = document.createElement("ul");
    notes.id = "sweep-notes";
    notes.className = "muted";
    for (const p of moved) {
      const li = document.createElement("li");
      li.textContent = `micro-batch ${p.batch}: ${p.adjusted}`;
      notes.appendChild(li);
    }
    box.appendChild(notes);
  }
}

async function sweepPoints(body) {
  const request = { ...body, vary: { "training.micro_batch_size": SWEEP_BATCHES } };
  if (request.set) { request.set = { ...request.set }; delete request.set["training.micro_batch_size"]; }
  let raw;
  try {
    const result = await getJSON("/v1/sweep", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(request) });
    raw = result.points.map((p) => ({ batch: p.values["training.micro_batch_size"], outcome: p.error ? null : p }));
  } catch (error) {
    if (error.status !== 404 && error.status !== 405) throw error;
    raw = await Promise.all(SWEEP_BATCHES.map(async (b) => {   // a server without /v1/sweep
      const one = JSON.parse(JSON.stringify(body));
      if (one.config && typeof one.config === "object") one.config.training.micro_batch_size = b;
      else one.set = { ...(one.set || {}), "training.micro_batch_size": b };
      try { return { batch: b, outcome: await getJSON("/v1/predict", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(one) }) }; }
      catch (e) { return { batch: b, outcome: null }; }
    }));
  }
  return raw.map(({ batch, outcome }) => {
    if (!outcome) return { batch: batch, rate: null, fits: false };
    const tokens = outcome.throughput_tokens_per_s;
    return { batch: batch, rate: tokens || outcome.throughput_samples_per_s, unit: tokens ? "tokens/s" : "samples/s",
      fits: outcome.fits_in_memory, adjusted: outcome.adjusted || "" };
  });
}

let runs = 0;

async function run(event) {
  if (event) event.preventDefault();
  const results = $("results");
  const current = ++runs;
  results.dataset.state = "running";
  $("go").disabled = true;
  clearResults();  // a new answer or error replaces the old one
  try {
    const body = buildRequest();
    const prediction = await getJSON("/v1/predict", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (current !== runs) return;
    renderPrediction(prediction);
    results.dataset.state = "predicted";
    const points = await sweepPoints(body);
    if (current !== runs) return;
    renderSweep(points);
    results.dataset.state = "done";
    results.dataset.finished = String(current);
  } catch (error) {
    if (current !== runs) return;
    clearResults();
    $("error").textContent = error.message;
    $("error").hidden = false;
    results.dataset.state = "error";
    results.dataset.finished = String(current);
  } finally {
    if (current === runs) $("go").disabled = false;
  }
}

function fill(select, items, chosen, blank) {
  select.textContent = "";
  if (blank) select.appendChild(new Option(blank, ""));
  for (const item of items) select.appendChild(new Option(item.label, item.value, false, item.value === chosen));
}

async function start() {
  document.querySelectorAll("input[name=mode]").forEach((radio) => radio.addEventListener("change", () => setMode(mode() === "yaml")));
  $("yaml").addEventListener("input", () => { clearTimeout(configTimer); configTimer = setTimeout(readConfig, 300); });
  $("form").addEventListener("submit", run);
  try {
    const [gpus, models, model] = await Promise.all([getJSON("/v1/gpus"), getJSON("/v1/models"), getJSON("/v1/model")]);
    fill($("gpu"), gpus.map((g) => ({ value: g.name, label: `${g.name} (${g.memory_gb} GB)` })), "A100-80GB", "A100-80GB (default)");
    fill($("model"), models.map((m) => ({ value: m.name, label: `${m.name} (${number(m.params_total / 1e9, 3)} B)` })), "llama2-7b");
    readsDatasets = Boolean(model.reads_datasets);
    const m = model.model;
    $("model-info").textContent = m.kind === "learned"
      ? `learned model version ${m.version}, ${m.trained_rows.toLocaleString("en-US")} training rows (${m.source})`
      : "analytic model only: no learned model loaded";
    document.body.dataset.ready = "true";
  } catch (error) {
    $("error").textContent = `cannot load the catalogs: ${error.message}`;
    $("error").hidden = false;
  }
}

start();
