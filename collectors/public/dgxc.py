"""NVIDIA DGX Cloud benchmarking recipes: published step times joined with parallel configs.

Normalisation:
- step_time_s is the published "Training step time (seconds per step)"; tokens_per_s is the
  published total. Tokens per step = step_time * tokens_per_s equals GBS * seq_len exactly in
  these tables, which is used as a consistency check on every join below.
- Parallel config (TP, PP, CP, MBS, GA): from the table title, e.g. "(TP=4, PP=1, MBS=4, GA=4)",
  with per-row PP/layers where the table gives them (405B proxy rows); otherwise joined from the
  configs CSV of the same README and tag (model size, GPU count within the row's range, GPU kind,
  precision), accepted only when exactly one joined config satisfies GBS * SeqLen = tokens per
  step within 1 %.
- GBS: the column header's "(GBS=...)", else MBS * DP * GA (DP = GPUs / (TP*PP*CP)), else the
  joined config. seq_len: the title's SEQ=, the joined config's SeqLen, else tokens per step / GBS
  when that is a power of two (1024..16384) within 1 %.
- Proxy models (405B with fewer layers on few GPUs) keep model_name llama3.1-405b with
  num_layers set to the published layer count.
- precision BF16 -> amp_bf16, FP8 -> fp8; strategy zero1 for NeMo (distributed optimizer),
  fsdp for MaxText/Paxml ("FSDP+DP"). framework nemo / maxtext / paxml.
- The same numbers under several tags are one row; different numbers for the same config in
  different tags are different container releases: all kept, sharing one run_group (re-runs of
  one configuration count as one run in training).
- Skipped: Grok-1 and Paxml GPT-5B (no catalog dims), LoRA fine-tuning (rank not stated),
  malformed cells, rows whose config cannot be determined uniquely.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

GPU_KEYS = {"H100": "H100-SXM", "GB200": "GB200", "B200": "B200", "B300": "B300"}
PRECISIONS = {"BF16": "amp_bf16", "FP8": "fp8"}
CONFIGS_FILE = "nvidia_dgxc_benchmarking_configs.csv"
_POW2 = (1024, 2048, 4096, 8192, 16384)
# Layer count -> size label, per recipe folder (Llama 3.1 and Nemotron-4 model cards).
_SIZE_BY_LAYERS = {"llama3.1": {32: "8b", 80: "70b", 126: "405b"}, "nemotron": {32: "15b", 96: "340b"}}


def _model(title: str) -> tuple[str, str, str, str] | str:
    """(catalog key, family, framework, task) from a table title, or a skip reason."""
    t = title.lower()
    if "grok" in t:
        return "model without a catalog key (Grok-1)"
    if "lora" in t:
        return "LoRA fine-tuning (adapter rank not stated)"
    task = "sft" if "sft" in t else "pretrain"
    if m := re.search(r"llama ?3\.1 (8|70|405)b", t):
        return f"llama3.1-{m.group(1)}b", "llama", "nemo", task
    if m := re.search(r"maxtext llama ?(2|3) 70b", t):
        return f"llama{m.group(1)}-70b", "llama", "maxtext", task
    if m := re.search(r"llama ?3 (8|70)b finetuning sft", t):
        return f"llama3-{m.group(1)}b", "llama", "nemo", task
    if m := re.search(r"nemotron4? (15|340)b", t):
        return f"nemotron4-{m.group(1)}b", "nemotron", "nemo", task
    if "nemo megatron" in t:
        return "gpt3-175b", "gpt", "nemo", task
    if "paxml gpt175b" in t:
        return "gpt3-175b", "gpt", "paxml", task
    if "paxml gpt5b" in t:
        return "Paxml GPT-5B (dims not in the table, not verified equal to NeMo GPT3-5B)"
    return f"unrecognised table title: {title}"


def _title_config(text: str) -> dict[str, int]:
    return {k.upper(): int(v) for k, v in re.findall(r"\b(TP|PP|CP|VP|MBS|GA|SEQ)\s*=\s*(\d+)", text, re.I)}


def _refs(text: str) -> set[str]:
    return {part.split("(")[0].strip() for part in text.split(";") if part.strip()}


def _gpu_range(text: str) -> tuple[int, int] | None:
    text = text.replace("*", "").strip()
    if m := re.fullmatch(r"(\d+)\s*-\s*(\d+)", text):
        return int(m.group(1)), int(m.group(2))
    if m := re.fullmatch(r"\d+", text):
        return int(text), int(text)
    return None


def _formula(text: str, gpus: int) -> int | None:
    """Evaluate config cells like 'GPUs*4', 'GPUs/32', '2048'."""
    text = text.replace(" ", "")
    if m := re.fullmatch(r"GPUs\*(\d+)", text):
        return gpus * int(m.group(1))
    if m := re.fullmatch(r"GPUs/(\d+)", text):
        return gpus // int(m.group(1)) if gpus % int(m.group(1)) == 0 else None
    if text == "GPUs":
        return gpus
    return parse_int(text)


def _candidate_configs(row: pd.Series, size: str, configs: pd.DataFrame) -> list[dict[str, Any]]:
    """Configs of the same README/tag that fit this step-time row."""
    out = []
    n = int(row["n_gpus"])
    refs = _refs(row["refs"])
    for _, c in configs[configs["readme_path"] == row["readme_path"]].iterrows():
        if not refs & _refs(c["refs"]):
            continue
        c_size = (c["col_Size"] or c["col_Model_Size"] or c["col_Llama3_1_Model_Size"]).lower()
        if not c_size:  # some README versions name the size only through the layer count
            c_size = _SIZE_BY_LAYERS.get(row["readme_path"].split("/")[0], {}).get(
                parse_int(c["col_Layers"]) or 0, ""
            )
        if c_size.removesuffix("-proxy") != size:
            continue
        rng = _gpu_range(c["col_GPUs"])
        if rng is None or not rng[0] <= n <= rng[1]:
            continue
        kinds = [k for k in ("GB300", "GB200", "B300", "B200", "H100") if k in c["section"]]
        if kinds and kinds[0] != row["gpu"]:
            continue
        prec = c["col_Precision"] or c["col_Datatype"]
        if prec and row["precision"] not in re.split(r"[/ ,]+", prec.upper()):
            continue
        cfg = {
            "TP": parse_int(c["col_TP"]) or 1,
            "PP": parse_int(c["col_PP"]) or 1,
            "CP": parse_int(c["col_CP"]) or 1,
            "MBS": parse_int(c["col_MBS"]),
            "GA": parse_int(c["col_GA"]),
            "GBS": _formula(c["col_GBS"], n),
            "SEQ": parse_int(c["col_SeqLen"]),
            "VP": parse_int(c["col_VP"]),
            "LAYERS": parse_int(c["col_Layers"]),
            "proxy": c_size.endswith("-proxy"),
        }
        out.append(cfg)
    return out


def import_nvidia_dgxc_benchmarking_step_times(
    path: str | Path, configs_path: str | Path | None = None
) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    configs_path = Path(configs_path) if configs_path else path.parent / CONFIGS_FILE
    configs = read_csv(configs_path) if configs_path.is_file() else pd.DataFrame(columns=["readme_path"])
    frame = read_csv(path)
    # The same numbers listed under several tags (titles differ only by the container tag): one row.
    frame["_model"] = [str(_model(t)) for t in frame["table_title"]]
    same = frame.duplicated(
        ["_model", "gpu", "precision", "n_gpus", "step_time_s", "tokens_per_sec_total"], keep="first"
    )
    sink.skip("same numbers listed under another tag", int(same.sum()))
    for _, r in frame[~same].iterrows():
        _import_row(r, configs, sink)
    return sink.result()


def _import_row(r: pd.Series, configs: pd.DataFrame, sink: RowSink) -> None:
    model = _model(r["table_title"])
    if isinstance(model, str):
        sink.skip(model)
        return
    model_key, family, framework, task = model
    gpu = GPU_KEYS.get(r["gpu"])
    precision = PRECISIONS.get(r["precision"])
    if gpu is None or precision is None:
        sink.skip(f"unknown gpu or precision: {r['gpu']} {r['precision']}")
        return
    if re.search(r"\d\s+\d", r["step_time_s"]) or re.search(r"\d\s+\d", r["tokens_per_sec_total"]):
        sink.skip("malformed number cell")
        return
    step = parse_number(r["step_time_s"])
    tps = parse_number(r["tokens_per_sec_total"])
    n = parse_int(r["n_gpus"])
    if not step or not tps or not n:
        sink.skip("missing step time, throughput or GPU count")
        return
    tokens_step = step * tps
    cfg: dict[str, Any] = _title_config(r["title_config"])
    source_of_cfg = "table title"
    if "FSDP+DP" in r["title_config"]:
        cfg.setdefault("TP", 1)
        cfg.setdefault("PP", 1)
    gbs = parse_int(r["global_batch_size"])
    layers = parse_int(r["layers"])
    if parse_int(r["pp"]):
        cfg["PP"] = parse_int(r["pp"])
    proxy = False
    if "MBS" not in cfg or "TP" not in cfg:
        size = model_key.rsplit("-", 1)[1]
        candidates = _candidate_configs(r, size, configs)
        fits = []
        for c in candidates:
            if gbs and c["GBS"] and c["GBS"] != gbs:
                continue
            c_gbs = gbs or c["GBS"]
            if c_gbs and c["SEQ"] and abs(c_gbs * c["SEQ"] / tokens_step - 1) < 0.01 and c["MBS"]:
                fits.append({**c, "GBS": c_gbs})
        distinct = {tuple(sorted((k, v) for k, v in c.items())) for c in fits}
        if len(distinct) != 1:
            sink.skip(
                "no unique parallel config in the configs table" if not distinct else "ambiguous config join"
            )
            return
        joined = fits[0]
        cfg = {**joined, **{k: v for k, v in cfg.items() if k in ("SEQ",)}}
        gbs = joined["GBS"]
        layers = layers or (joined["LAYERS"] if joined["proxy"] else None)
        proxy = joined["proxy"]
        source_of_cfg = "configs table (same README and tag)"
    tp, pp, cp, mbs = cfg.get("TP", 1), cfg.get("PP", 1), cfg.get("CP", 1), cfg["MBS"]
    if n % (tp * pp * cp):
        sink.skip("GPU count not divisible by TP x PP x CP")
        return
    dp = n // (tp * pp * cp)
    if gbs is None and cfg.get("GA"):
        gbs = mbs * dp * cfg["GA"]
    seq = cfg.get("SEQ")
    if gbs is None:
        sink.skip("global batch size not determinable")
        return
    if seq is None:
        guess = tokens_step / gbs
        seq = next((p for p in _POW2 if abs(guess / p - 1) < 0.01), None)
        if seq is None:
            sink.skip("sequence length not determinable")
            return
    if abs(gbs * seq / tokens_step - 1) > 0.01:
        sink.skip("GBS x seq_len inconsistent with step time x tokens/s")
        return
    if gbs % (mbs * dp):
        sink.skip("global batch not divisible by micro batch x data parallel")
        return
    ga = gbs // (mbs * dp)
    if layers and model_key == "llama3.1-405b" and layers != 126:
        proxy = True
    mfu = parse_number(r["mfu"])
    first_ref = sorted(_refs(r["refs"]))[0]
    citation = f"NVIDIA/dgxc-benchmarking@{first_ref}:{r['readme_path']} (blob {r['blob'][:10]}; table '{r['table_title']}', column '{r['column_header']}')"
    sink.add(
        config={k: r[k] for k in ("readme_path", "refs", "table_title", "column_header", "step_time_s")},
        # the same configuration under another container tag is a re-run of one run
        run_key={"workload": [model_key, framework, layers, gpu, precision, n, tp, pp, cp, mbs, gbs, seq]},
        citation=citation,
        collected_at=min(re.findall(r"\((\d{4}-\d{2}-\d{2})\)", r["refs"]) or [None]),
        hardware_id=f"DGX Cloud {r['gpu']}",
        notes=(
            f"step_time_s as published; parallel config from {source_of_cfg}; tokens/step = {tokens_step:.0f} "
            f"= GBS {gbs} x seq {seq}; VP {cfg.get('VP') or '-'}; refs {r['refs']}"
            + ("; proxy model with fewer layers" if proxy else "")
        ),
        model=(model_key, family),
        num_layers=layers if proxy else None,
        batch=Batch(mbs, gbs, seq, ga),
        precision=precision,
        layout=Layout(gpu, n, "zero1" if framework == "nemo" else "fsdp", tp, pp, cp, gpu_name_raw=r["gpu"]),
        framework=framework,
        step_time_s=step,
        tokens_per_s=tps,
        reported_mfu=mfu / 100 if mfu is not None else None,
    )


def import_nvidia_dgxc_benchmarking_configs(path: str | Path) -> ImportResult:
    """The configs table holds no measurements; it is joined into the step-time rows."""
    path = Path(path)
    sink = RowSink(path.stem)
    sink.skip("configuration table (joined into nvidia_dgxc_benchmarking_step_times)", len(read_csv(path)))
    return sink.result()
