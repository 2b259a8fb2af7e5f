// The perfmodel page: builds a request from the form, calls /v1/predict and /v1/sweep, and draws
// each interval as an inline SVG bar. No libraries, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const SWEEP_BATCHES = [1, 2, 4, 8, 16, 32, 64];

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
    body.config = $("yaml").value;
    const set = {};
    if ($("precision").value) set["training.precision"] = $("precision").value;
    if (intOrNull("micro_batch_size") !== null) set["training.micro_batch_size"] = intOrNull("micro_batch_size");
    if (intOrNull("seq_len") !== null) set["training.seq_len"] = intOrNull("seq_len");
    if (Object.keys(set).length) body.set = set;
    if ($("gpu").value) body.gpu = $("gpu").value;
    if (intOrNull("num_gpus") !== null) body.num_gpus = intOrNull("num_gpus");
    if (tokens !== null) body.tokens = tokens;
    return body;
  }
  const training = { seq_len: intOrNull("seq_len") || 2048, micro_batch_size: intOrNull("micro_batch_size") || 1 };
  if ($("precision").value) training.precision = $("precision").value;
  if (tokens !== null) training.tokens = tokens;
  if ($("method").value !== "full") training.lora_r = 16;
  if ($("method").value === "qlora") training.quantization_bits = 4;
  const gpus = intOrNull("num_gpus") || 1;
  body.config = {
    model: { name: $("model").value },
    training: training,
    hardware: { gpu: $("gpu").value || "A100-80GB", num_gpus: gpus, strategy: gpus > 1 ? "fsdp" : "ddp" },
  };
  return body;
}

// --- formatting -------------------------------------------------------------------------------

function duration(s) {
  if (!isFinite(s)) return "-";
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400 * 2) { const h = Math.floor(s / 3600); return `${h} h ${Math.round((s - h * 3600) / 60)} min`; }
  return `${(s / 86400).toFixed(1)} days`;
}
const number = (x, digits = 3) => (!isFinite(x) ? "-" : Number(x.toPrecision(digits)).toLocaleString("en-US"));
const usd = (x) => (x >= 100 ? `$${Math.round(x).toLocaleString("en-US")}` : `$${x.toFixed(2)}`);
const gb = (x) => `${x.toFixed(1)} GB`;

// --- drawing ----------------------------------------------------------------------------------

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function intervalBar(iv, fmt, limit) {
  const width = 280, height = 34, left = 4, right = width - 4;
  const top = Math.max(iv.high, limit || 0) * 1.08 || 1;
  const x = (v) => left + (right - left) * (v / top);
  const svg = el("svg", { width: width, height: height, viewBox: `0 0 ${width} ${height}`, class: "bar", role: "img" });
  el("rect", { x: left, y: 10, width: right - left, height: 8, rx: 4, fill: "#e4e7eb" }, svg);
  el("rect", { class: "band", x: x(iv.low), y: 8, width: Math.max(2, x(iv.high) - x(iv.low)), height: 12, rx: 3, fill: "var(--band)" }, svg);
  el("rect", { class: "tick", x: x(iv.estimate) - 1.5, y: 4, width: 3, height: 20, fill: "var(--tick)" }, svg);
  if (limit) {
    el("line", { class: "limit", x1: x(limit), x2: x(limit), y1: 2, y2: 26, stroke: "var(--bad)", "stroke-dasharray": "3 2" }, svg);
    el("text", { x: right, y: 33, "text-anchor": "end" }, svg).textContent = `capacity ${fmt(limit)}`;
  }
  el("text", { x: left, y: 33 }, svg).textContent = "0";
  return svg;
}

function card(key, title, iv, fmt, options = {}) {
  const div = document.createElement("div");
  div.className = "card" + (options.bad ? " bad" : "");
  div.dataset.metric = key;
  div.dataset.estimate = String(iv.estimate);
  div.dataset.low = String(iv.low);
  div.dataset.high = String(iv.high);
  div.innerHTML = `<h3></h3><div class="value"></div><div class="range"></div>`;
  div.querySelector("h3").textContent = title;
  div.querySelector(".value").textContent = fmt(iv.estimate) + (options.suffix || "");
  div.querySelector(".range").textContent = `${fmt(iv.low)} – ${fmt(iv.high)}`;
  div.appendChild(intervalBar(iv, fmt, options.limit));
  return div;
}

function renderPrediction(p) {
  const cards = $("cards");
  cards.textContent = "";
  const level = Math.round(p.confidence_level * 100);
  cards.appendChild(card("total_time_s", `Total time (${level}% interval)`, p.total_time_s, duration));
  cards.appendChild(card("gpu_hours", "GPU-hours", p.gpu_hours, (x) => number(x)));
  if (p.cost_usd) cards.appendChild(card("cost_usd", "Cost (USD)", p.cost_usd, usd));
  cards.appendChild(card("peak_memory_gb", "Peak memory per GPU", p.peak_memory_gb, gb, {
    limit: p.memory_capacity_gb || null, bad: !p.fits_in_memory, suffix: p.fits_in_memory ? " (fits)" : " (does not fit)",
  }));
  const rate = p.throughput_tokens_per_s || p.throughput_samples_per_s;
  cards.appendChild(card("throughput", p.throughput_tokens_per_s ? "Throughput (tokens/s)" : "Throughput (samples/s)", rate, (x) => number(x)));
  const warnings = $("warnings");
  warnings.textContent = "";
  for (const w of p.warnings || []) {
    const li = document.createElement("li");
    li.textContent = w;
    warnings.appendChild(li);
  }
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
    el("circle", { class: p.fits ? "sweep-point" : "sweep-point no-fit", cx: x, cy: Y(p.rate.estimate), r: 4,
      fill: p.fits ? "var(--tick)" : "#fff", stroke: p.fits ? "var(--tick)" : "var(--bad)", "stroke-width": 2 }, svg);
  }
  el("text", { x: (width + pad.l) / 2, y: height - 6, "text-anchor": "middle" }, svg).textContent =
    "micro-batch size (hollow red: does not fit in memory)";
  el("text", { x: pad.l, y: 12 }, svg).textContent = `throughput, ${usable[0].unit} (band: interval)`;
  box.appendChild(svg);
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
    return { batch: batch, rate: tokens || outcome.throughput_samples_per_s, unit: tokens ? "tokens/s" : "samples/s", fits: outcome.fits_in_memory };
  });
}

async function run(event) {
  if (event) event.preventDefault();
  const results = $("results");
  results.dataset.state = "running";
  $("go").disabled = true;
  $("error").hidden = true;
  try {
    const body = buildRequest();
    const prediction = await getJSON("/v1/predict", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    renderPrediction(prediction);
    results.dataset.state = "predicted";
    renderSweep(await sweepPoints(body));
    results.dataset.state = "done";
  } catch (error) {
    $("error").textContent = error.message;
    $("error").hidden = false;
    results.dataset.state = "error";
  } finally {
    $("go").disabled = false;
  }
}

function fill(select, items, chosen, blank) {
  select.textContent = "";
  if (blank) select.appendChild(new Option(blank, ""));
  for (const item of items) select.appendChild(new Option(item.label, item.value, false, item.value === chosen));
}

async function start() {
  document.querySelectorAll("input[name=mode]").forEach((radio) => radio.addEventListener("change", () => {
    const yaml = mode() === "yaml";
    $("catalog-fields").hidden = yaml;
    $("yaml-fields").hidden = !yaml;
    $("gpu").options[0].text = yaml ? "(config's)" : "A100-80GB (default)";
  }));
  $("form").addEventListener("submit", run);
  try {
    const [gpus, models, model] = await Promise.all([getJSON("/v1/gpus"), getJSON("/v1/models"), getJSON("/v1/model")]);
    fill($("gpu"), gpus.map((g) => ({ value: g.name, label: `${g.name} (${g.memory_gb} GB)` })), "A100-80GB", "A100-80GB (default)");
    fill($("model"), models.map((m) => ({ value: m.name, label: `${m.name} (${number(m.params_total / 1e9, 3)} B)` })), "llama2-7b");
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
