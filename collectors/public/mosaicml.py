"""MosaicML throughput tables: LLM Foundry's MPT benchmarks (main README, all versions), its
unmerged branch experiments, and the earlier MosaicGPT tables of mosaicml/examples.

Normalisation (all three files):
- step_time_s = global_batch_size * seq_len / tokens_per_sec_total (the table's "Throughput
  (T/s)" over all GPUs); samples_per_s = tokens_per_s / seq_len (the table's own S/s column is
  rounded to an integer, 0 for long sequences, so it is not used).
- precision: `amp_bf16` -> amp_bf16; `amp_fp8` -> fp8; the A100 tables' `bf16` (MP mode PURE) is
  Composer's amp_bf16 with FSDP mixed-precision PURE: fp32 sharded master weights, bf16 compute
  -> amp_bf16.
- strategy: FSDP FULL_SHARD -> fsdp, SHARD_GRAD_OP -> zero2; framework composer-fsdp.
- num_nodes = num_gpus / 8 (8-GPU HGX/DGX nodes of MosaicML's clusters).
- model dims: n_layers / d_model / n_heads from the llm-foundry mpt-<size>.yaml (the file's
  config_* columns); MPT's MLP is 4*d, not gated, MHA; params_total is the table's NumParams
  (it includes the learned position embedding, so it grows with seq_len). MosaicGPT rows use
  the same dims by size label, accepted only when the table's own parameter count agrees
  within 1 %.
- reported_mfu: the table's MFU (attention FLOPs included, non-causal, as perfmodel's
  convention), as a fraction.
- Duplicates: the same configuration measured in several README versions keeps only the
  latest version; earlier values are skipped as superseded (they were regenerated with newer
  software). Different configurations are all kept, including the 84 rows of the older A100-80GB
  table that is no longer in the latest llm-foundry README.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from collectors.public._common import (
    Batch,
    ImportResult,
    Layout,
    RowSink,
    parse_bool,
    parse_int,
    parse_number,
    read_csv,
)

GPU_KEYS = {"a100_80gb": "A100-80GB", "a100_40gb": "A100-40GB", "h100_80gb": "H100-SXM"}
PRECISIONS = {"amp_bf16": "amp_bf16", "bf16": "amp_bf16", "amp_fp8": "fp8"}
STRATEGIES = {"FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "zero2"}
MODEL_KEYS = {s: f"mpt-{s}" for s in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")}
# n_layers, d_model, n_heads of llm-foundry scripts/train/yamls/pretrain/mpt-<size>.yaml (the
# config_* columns of mosaicml_llm_foundry_mpt_benchmarks.csv).
MPT_DIMS = {
    "125m": (12, 768, 12),
    "350m": (24, 1024, 16),
    "760m": (24, 1536, 12),
    "1b": (24, 2048, 16),
    "3b": (32, 2560, 20),
    "7b": (32, 4096, 32),
    "13b": (40, 5120, 40),
    "30b": (48, 7168, 56),
    "70b": (80, 8192, 64),
}
MPT_VOCAB = 50368  # llm-foundry mpt-*.yaml: model.vocab_size
FOUNDRY_FILE = "mosaicml_llm_foundry_mpt_benchmarks.csv"
_CONFIG_COLUMNS = ("size", "seq_len", "gpu", "n_gpus", "micro_batch_size", "grad_accum")


def _size(model: str) -> str:
    return model.strip().lower().removeprefix("gpt")


def _mpt_params(size: str, seq_len: int) -> float:
    n_layers, d, _ = MPT_DIMS[size]
    return 12 * n_layers * d * d + (MPT_VOCAB + seq_len) * d


def _row(
    r: dict[str, Any],
    sink: RowSink,
    *,
    citation: str,
    date: str,
    extra_notes: str,
    mfu_scale: float | None,
    repeat_index: int = 0,
    run_key: dict[str, Any] | None = None,
) -> None:
    size = _size(r["model"])
    gpu = GPU_KEYS.get(r["gpu"].strip().lower())
    if gpu is None:
        sink.skip(f"gpu not in catalog: {r['gpu']}")
        return
    precision = PRECISIONS.get(r["precision"].strip().lower())
    if precision is None:
        sink.skip(f"unknown precision: {r['precision']}")
        return
    if size not in MPT_DIMS:
        sink.skip(f"unknown model size: {r['model']}")
        return
    seq = parse_int(r["seq_len"])
    n_gpus = parse_int(r["n_gpus"])
    mbs = parse_int(r["micro_batch_size"])
    ga = parse_int(r["grad_accum"])
    gbs = parse_int(r["global_batch_size"])
    tps = parse_number(r["tokens_per_sec_total"])
    if None in (seq, n_gpus, mbs, ga, gbs) or min(seq, n_gpus, mbs, ga, gbs) <= 0:  # type: ignore[type-var]
        sink.skip("missing or non-positive batch/parallel configuration")
        return
    partial = ""
    if gbs != mbs * ga * n_gpus:  # type: ignore[operator]
        if ga != -(-gbs // (mbs * n_gpus)):  # type: ignore[operator]
            sink.skip("global batch inconsistent with micro batch x grad accum x GPUs")
            return
        partial = f"; grad_accum = ceil({gbs}/({n_gpus}*{mbs})): the last micro-batch is partial"
    if not tps or tps <= 0:
        sink.skip("no throughput")
        return
    if parse_bool(r.get("activation_cpu_offload", "")):
        sink.skip("activation CPU offload (no schema column for it)")
        return
    strategy = STRATEGIES.get(r["sharding_strategy"].strip().upper())
    if strategy is None:
        sink.skip(f"unknown sharding strategy: {r['sharding_strategy']}")
        return
    params = parse_number(r.get("params"))
    n_layers, d_model, n_heads = MPT_DIMS[size]
    dims_from = "config_* columns"
    if r.get("config_d_model"):
        n_layers, d_model, n_heads = (
            int(r["config_n_layers"]),
            int(r["config_d_model"]),
            int(r["config_n_heads"]),
        )
    else:
        dims_from = "llm-foundry mpt yaml by size label"
        if params is None or abs(params / _mpt_params(size, seq) - 1) > 0.01:  # type: ignore[arg-type]
            sink.skip("model dims not confirmed by the table's parameter count")
            return
    mfu = parse_number(r.get("mfu"))
    if mfu is not None:
        mfu = mfu / 100 if (mfu_scale is None and mfu > 1.5) or mfu_scale == 100 else mfu
    step = gbs * seq / tps  # type: ignore[operator]
    torch_version = None
    docker = r.get("docker_image", "")
    if docker.startswith("mosaicml/pytorch:"):
        torch_version = docker.split(":", 1)[1].split("_", 1)[0]
    compile_note = (
        "; torch.compile on (compile_config {})" if r.get("compile_config", "").strip() == "{}" else ""
    )
    notes = (
        f"step_time_s = global_batch_size*seq_len / tokens_per_sec_total ({gbs}*{seq}/{tps:g}); "
        f"MP mode {r.get('mp_mode', '')}; precision column '{r['precision']}'; dims from {dims_from}"
        f"{compile_note}{partial}{extra_notes}"
    )
    config = {
        k: r.get(k, "")
        for k in (
            "model",
            "seq_len",
            "gpu",
            "n_gpus",
            "precision",
            "mp_mode",
            "sharding_strategy",
            "activation_checkpointing",
            "micro_batch_size",
            "grad_accum",
            "docker_image",
            "compile_config",
            "table_section",
            "section",
        )
    }
    if repeat_index:
        config["repeat"] = r["tokens_per_sec_total"]
    sink.add(
        config=config,
        run_key=run_key,
        repeat_index=repeat_index,
        citation=citation,
        collected_at=date,
        hardware_id=r.get("table_section") or r.get("section") or r.get("gpu_config") or None,
        notes=notes,
        model=(MODEL_KEYS[size], "mpt"),
        params_total=params,
        hidden_size=d_model,
        num_layers=n_layers,
        num_heads=n_heads,
        num_kv_heads=n_heads,
        ffn_hidden_size=4 * d_model,
        vocab_size=MPT_VOCAB,
        gated_mlp=False,
        num_experts=1,
        experts_per_token=1,
        batch=Batch(mbs, gbs, seq, ga),
        precision=precision,
        activation_checkpointing=parse_bool(r["activation_checkpointing"]),
        torch_compile=bool(compile_note) or None,
        layout=Layout(gpu, n_gpus, strategy, gpu_name_raw=r["gpu"]),
        framework="composer-fsdp",
        torch_version=torch_version,
        step_time_s=step,
        tokens_per_s=tps,
        samples_per_s=tps / seq,  # type: ignore[operator]
        reported_mfu=mfu,
    )


def _config_key(r: pd.Series | dict[str, Any]) -> tuple[str, ...]:
    return (
        _size(r["model"]),
        r["seq_len"],
        r["gpu"].lower(),
        r["n_gpus"],
        r["precision"].lower(),
        r["activation_checkpointing"].lower(),
        r["micro_batch_size"],
        r["grad_accum"],
        r["sharding_strategy"].upper(),
    )


def _keep_latest(
    frame: pd.DataFrame, date_col: str, sink: RowSink, extra_key: tuple[str, ...] = ()
) -> pd.DataFrame:
    """Keep the latest row per configuration; count the others as superseded/duplicate."""
    frame = frame.copy()
    frame["_key"] = [(*_config_key(r), *(r[c] for c in extra_key)) for _, r in frame.iterrows()]
    frame["_tps"] = [round(parse_number(v) or 0) for v in frame["tokens_per_sec_total"]]
    frame = frame.sort_values(date_col, kind="stable")
    keep = ~frame.duplicated("_key", keep="last")
    for _, r in frame[~keep].iterrows():
        latest = frame[keep & (frame["_key"] == r["_key"])].iloc[0]
        if latest["_tps"] == r["_tps"]:
            sink.skip("duplicate of the same measurement in a later README version")
        else:
            sink.skip("superseded by a later measurement of the same configuration")
    return frame[keep].sort_index()


def _foundry_keys(folder: Path) -> dict[tuple[str, ...], int]:
    """Configuration -> rounded tokens/s of every llm-foundry main-README row (if the file is there)."""
    path = folder / FOUNDRY_FILE
    if not path.is_file():
        return {}
    frame = read_csv(path)
    return {_config_key(r): round(parse_number(r["tokens_per_sec_total"]) or 0) for _, r in frame.iterrows()}


def import_mosaicml_llm_foundry_mpt_benchmarks(path: str | Path) -> ImportResult:
    """LLM Foundry scripts/train/benchmarking/README.md, all versions on main."""
    path = Path(path)
    sink = RowSink(path.stem)
    frame = _keep_latest(read_csv(path), "readme_last_date", sink)
    for _, r in frame.iterrows():
        repo, _, file = r["source"].partition(":")
        citation = f"{repo}@{r['readme_last_commit']}:{file} (table '{r['table_section']}', first in {r['readme_first_commit'][:10]})"
        latest = (
            ""
            if r["in_latest_readme"] == "True"
            else "; not in the latest README (older A100-80GB table, replaced Oct 2023)"
        )
        _row(
            r.to_dict(),
            sink,
            citation=citation,
            date=r["readme_first_date"],
            extra_notes=latest,
            mfu_scale=100,
        )
    return sink.result()


def import_mosaicml_examples_mosaicgpt_benchmarks(path: str | Path) -> ImportResult:
    """mosaicml/examples MosaicGPT throughput tables (Dec 2022 - Apr 2023)."""
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    frame["activation_checkpointing"] = frame["activation_checkpointing"].str.lower()
    frame = _keep_latest(frame, "last_date", sink)
    foundry = _foundry_keys(path.parent)
    for _, r in frame.iterrows():
        key = _config_key(r)
        if key in foundry:
            tps = round(parse_number(r["tokens_per_sec_total"]) or 0)
            sink.skip(
                "same measurement as an llm-foundry README row"
                if foundry[key] == tps
                else "superseded by the llm-foundry README row of the same configuration"
            )
            continue
        repo, _, file = r["source"].partition(":")
        citation = f"{repo}@{r['last_commit']}:{file} (table '{r['table_section']}', first in {r['first_commit'][:10]})"
        warn = (
            "; README version warns 30B/70B numbers are out of date"
            if r["readme_has_out_of_date_warning"] == "True"
            else ""
        )
        _row(r.to_dict(), sink, citation=citation, date=r["first_date"], extra_notes=warn, mfu_scale=None)
    return sink.result()


def import_mosaicml_llm_foundry_branch_experiments(path: str | Path) -> ImportResult:
    """Unmerged llm-foundry branch sweeps (lower quality: rows flagged `suspect` are skipped)."""
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    suspect = frame["suspect"].str.strip() != ""
    sink.skip("flagged suspect in the source (MFU > 100 %)", int(suspect.sum()))
    frame = frame[~suspect].copy()
    # Several runs of one configuration in one sweep are noise repeats: distinct throughputs are
    # kept (repeat_index 0, 1, ..., one shared run_group); the same throughput copied into
    # several files is kept once, preferring the README copy (h100.csv's MFU used a different peak).
    extra = ("docker_image", "compile_config", "activation_cpu_offload")
    frame["_key"] = [(*_config_key(r), *(r[c] for c in extra)) for _, r in frame.iterrows()]
    frame["_tps"] = [round(parse_number(v) or 0) for v in frame["tokens_per_sec_total"]]
    frame["_readme"] = frame["source_path"].str.endswith("README.md")
    frame = frame.sort_values(["_readme", "source_date"], kind="stable")
    dup = frame.duplicated(["_key", "_tps"], keep="last")
    sink.skip("same measurement copied into several sweep files", int(dup.sum()))
    frame = frame[~dup].sort_values(["source_date", "source_path"], kind="stable")
    frame["_repeat"] = frame.groupby("_key").cumcount()
    foundry = _foundry_keys(path.parent)
    for _, r in frame.iterrows():
        if not r["docker_image"] and not r["compile_config"] and _config_key(r) in foundry:
            sink.skip("same configuration as a main-README row (the README value is kept)")
            continue
        citation = f"mosaicml/llm-foundry@{r['source_commit']}:{r['source_path']} (unmerged branch commit)"
        _row(
            r.to_dict(),
            sink,
            citation=citation,
            date=r["source_date"],
            extra_notes="; unmerged branch experiment (lower quality)",
            mfu_scale=100,
            repeat_index=int(r["_repeat"]),
            run_key={"repeats_of": list(r["_key"])},
        )
    return sink.result()
