"""Hugging Face PEFT's method comparison (method_comparison/{MetaMathQA,image-gen}/results/*.json).

One NVIDIA L40S, the benchmark's own training loop over eager Hugging Face transformers + PEFT
(run.py / utils.py of huggingface/peft method_comparison/MetaMathQA): bf16 weights
(`dtype=bfloat16`, `use_amp=false` -> `bf16`), AdamW, batch 4, no gradient accumulation,
`attn_implementation=None` (transformers' default for Llama: SDPA), `compile=false` in every run.

Rows imported: the `run_summary` rows, one per run. A summary is the run's own windows
aggregated (sum of window tokens / sum of window train time; step_time_s = sum of window train
time / steps), so importing the windows as well would count the run twice. The `eval_window`
rows (20 windows of 250 steps per run) are skipped with a reason: within a run they differ by
about +-2% in step time and 205-217 in tokens per sample (the same data order in every run), so
they add rows but no workload variation.

Normalisation:
- seq_len = tokens per sample = tokens_per_s / samples_per_s of the summary (unpadded tokens + 1
  EOS, ~210), rounded: batches are length-bucketed and padded to their longest sample, so the
  padded length is a little larger (stated in notes). tokens_per_s is the source's (unpadded).
- activation_checkpointing = the logged `use_gc`; where it is blank the run predates the option,
  and the code of that time had no gradient checkpointing at all (huggingface/peft@fd21ef80
  method_comparison/MetaMathQA/utils.py: get_base_model has none; the option was added later,
  default false), so blank -> False.
- torch_compile = `src_compile` (false in every run).
- peak_memory_gb is not imported: for MetaMathQA it is max_memory_reserved over training *and*
  the periodic generation eval (eval batch 50), not a training peak; the value is in notes.
- Methods kept: full fine-tuning; plain LoRA (the experiments of LORA_TARGETS: ranks 32/64 on
  q,v, rsLoRA r64 (only the scaling constant alpha/sqrt(r) differs: same cost), r10 on
  gate/up/down -> lora_target_modules 3), checked against the logged trainable parameter count;
  LN tuning (trains the RMSNorm weights only: trainable_fraction = (2L+1)d / parameters, the
  backward otherwise that of a frozen base). Every other PEFT method is skipped with its name:
  the workload expresses LoRA rank/targets, quantization bits and a trainable fraction only,
  and these methods change the per-step cost (DoRA's weight norm, LoRA-FA's frozen A,
  prompt/prefix tuning's extra tokens, IA3's activation scaling, OFT/BOFT's rotations, ...).
- Run groups: one per workload (task, method columns, checkpointing, compile): the runs of an
  experiment on other torch / transformers / peft versions, and experiments the workload cannot
  tell apart (LoRA r64 and rsLoRA r64), share the group (one configuration, one vote; the
  sample weight 1/k is filled by `perfmodel dataset build`). The same run committed in several
  versions of its result file (equal run_created_at) is kept once (latest commit); a run
  re-run with the *same* torch, transformers and peft versions is superseded by the re-run
  (the first batch of 2025-06-17/18, re-run two days later, is 15-35% slower in every method).
- Skipped: image-gen rows (FLUX.2-klein DreamBooth: a diffusion transformer with a text encoder
  and a VAE that the workload cannot describe); runs that did not succeed.
"""

from __future__ import annotations

from pathlib import Path

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

GPU_KEYS: dict[str, str | None] = {"NVIDIA L40S": "L40S"}
MODEL = ("llama3.2-3b", "llama")
"""meta-llama/Llama-3.2-3B: the catalog's dims (hidden 3072, 28 layers, 24 heads, 8 KV heads,
MLP 8192, vocab 128256, tied embeddings; config.json of the model)."""

# Llama-3.2-3B projection shapes (in + out features) for the LoRA parameter check.
_LAYERS, _D, _KV, _FFN = 28, 3072, 1024, 8192
_MATRIX_IN_OUT = {
    "q_proj": _D + _D,
    "k_proj": _D + _KV,
    "v_proj": _D + _KV,
    "o_proj": _D + _D,
    "gate_proj": _D + _FFN,
    "up_proj": _D + _FFN,
    "down_proj": _FFN + _D,
}
LORA_TARGETS: dict[str, tuple[str, ...]] = {
    "lora/llama-3.2-3B-rank32": ("q_proj", "v_proj"),
    "lora/llama-3.2-3B-rank64": ("q_proj", "v_proj"),
    "lora/llama-3.2-3B-rank64-rslora": ("q_proj", "v_proj"),
    "lora/llama-3.2-3B-rank10-target-mlp": ("gate_proj", "up_proj", "down_proj"),
}
"""Plain-LoRA experiments and their target modules (adapter_config.json of each result JSON)."""
LORA_VARIANTS: dict[str, str] = {
    "lora/llama-3.2-3B-rank32-lorafa": "LoRA-FA (A frozen, own optimizer): not plain LoRA",
    "lora/llama-3.2-3B-rank32-mica": "LoRA with MiCA init (different trainable set): not plain LoRA",
    "lora/llama-3.2-3B-rank14-target-mlp-bdlora": "BD-LoRA (block-diagonal adapters): not plain LoRA",
}
LN_TUNING_TRAINABLE = (2 * _LAYERS + 1) * _D
"""RMSNorm weights: input and post-attention norm per layer plus the final norm."""
LLAMA32_3B_PARAMS = 3_212_749_824
"""Exact parameter count of meta-llama/Llama-3.2-3B (catalog published_params note)."""


def import_peft_method_comparison(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    summaries = []
    for _, r in frame.iterrows():
        if r["task"] != "MetaMathQA":
            sink.skip(
                "image-gen (FLUX.2-klein DreamBooth: diffusion transformer + text encoder + VAE) not expressible"
            )
            continue
        if r["row_kind"] == "eval_window":
            sink.skip("eval window (the run is imported as its run_summary row)")
            continue
        if r["run_status"] != "success":
            sink.skip(f"run status {r['run_status']}")
            continue
        summaries.append(r)
    for r in _one_per_run(pd.DataFrame(summaries), sink):
        _add(sink, r)
    return sink.result()


def _one_per_run(frame: pd.DataFrame, sink: RowSink) -> list[pd.Series]:
    """Drop re-commits of one run and runs superseded by a re-run on the same library versions."""
    if frame.empty:
        return []
    frame = frame.sort_values(["run_created_at", "last_commit_date"], kind="stable")
    same_run = frame.duplicated(["experiment_name", "run_created_at"], keep="last")
    sink.skip("same run re-committed in a later version of its result file", int(same_run.sum()))
    frame = frame[~same_run]
    stack = ["experiment_name", "torch_version", "transformers_version", "peft_version"]
    superseded = frame.duplicated(stack, keep="last")
    sink.skip(
        "superseded by a re-run of the same experiment on the same torch/transformers/peft",
        int(superseded.sum()),
    )
    return [r for _, r in frame[~superseded].sort_index().iterrows()]


def _method(r: pd.Series) -> tuple[dict[str, object], str] | str:
    """(workload columns, description) of the run's method, or the reason it is skipped."""
    name, method = r["experiment_name"], r["method"]
    trainable = parse_int(r["src_num_trainable_params"])
    if method == "full":
        return {}, "full fine-tuning"
    if method == "ln_tuning":
        if trainable is not None and trainable != LN_TUNING_TRAINABLE:
            return "LN tuning with an unexpected trainable count"
        fraction = LN_TUNING_TRAINABLE / LLAMA32_3B_PARAMS
        return {"trainable_fraction": fraction}, f"LN tuning: {LN_TUNING_TRAINABLE} RMSNorm weights trainable"
    if name in LORA_VARIANTS:
        return LORA_VARIANTS[name]
    if method != "lora" or name not in LORA_TARGETS:
        return f"PEFT method not expressible by the workload: {method}"
    rank = parse_int(r["lora_r"])
    targets = LORA_TARGETS[name]
    expected = _LAYERS * rank * sum(_MATRIX_IN_OUT[m] for m in targets) if rank else None
    if expected is None or (trainable is not None and trainable != expected):
        return "LoRA trainable parameters disagree with the rank and targets"
    described = f"LoRA r={rank} on {','.join(targets)}" + (" (rsLoRA scaling)" if "rslora" in name else "")
    return {"lora_r": rank, "lora_target_modules": len(targets)}, described


def _add(sink: RowSink, r: pd.Series) -> None:
    gpu = GPU_KEYS.get(r["gpu"])
    if gpu is None:
        sink.skip(f"gpu not in catalog: {r['gpu']}")
        return
    method = _method(r)
    if isinstance(method, str):
        sink.skip(method)
        return
    columns, described = method
    tokens_per_s = parse_number(r["tokens_per_s"])
    samples_per_s = parse_number(r["samples_per_s"])
    step = parse_number(r["step_time_s"])
    batch = parse_int(r["micro_batch_size"])
    if not (tokens_per_s and samples_per_s and step and batch) or parse_int(r["grad_accum"]) != 1:
        sink.skip("missing throughput, step time or batch")
        return
    if r["optimizer"] != "AdamW":
        sink.skip(f"optimizer {r['optimizer']}")
        return
    if r["precision"] != "bf16" or r["src_use_amp"] != "False":
        sink.skip(f"precision not bf16 weights without autocast: {r['precision']}")
        return
    gc = parse_bool(r["activation_checkpointing"])
    compiled = parse_bool(r["src_compile"])
    tokens_per_sample = tokens_per_s / samples_per_s
    seq_len = round(tokens_per_sample)
    notes = (
        f"{r['experiment_name']} ({described}); torch {r['torch_version']}, transformers "
        f"{r['transformers_version']}, peft {r['peft_version']}; step_time_s = sum of window train time / "
        f"{r['src_max_steps']} steps (mean, not median; eval excluded); seq_len = tokens/s / samples/s = "
        f"{tokens_per_sample:.1f} unpadded tokens (+1 EOS) per sample, length-bucketed batches padded to their "
        f"longest; attention: transformers default (SDPA); use_gc {r['activation_checkpointing'] or 'not logged (option did not exist: no checkpointing)'}; "
        f"peak memory not imported ({r['peak_memory_gb']} GB reserved incl. generation eval at batch 50)"
    )
    sink.add(
        config={"blob": r["blob"]},
        run_key={"task": r["task"], "ac": bool(gc), "compile": bool(compiled), **columns},
        citation=f"huggingface/peft@{r['citation_commit']}:{r['citation_path']} (run summary, blob {r['blob'][:10]})",
        collected_at=r["run_created_at"],
        torch_version=r["torch_version"],
        notes=notes,
        model=MODEL,
        batch=Batch(batch, batch, seq_len),
        layout=Layout(gpu, 1, gpu_name_raw=r["gpu"]),
        precision="bf16",
        optimizer="adamw",
        framework="hf-eager",
        attention_kernel="sdpa",
        torch_compile=bool(compiled),
        activation_checkpointing=bool(gc),
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        samples_per_s=samples_per_s,
        warmup_steps=0,
        measured_steps=parse_int(r["src_max_steps"]),
        **columns,
    )
