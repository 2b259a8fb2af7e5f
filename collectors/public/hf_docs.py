"""Hugging Face transformers performance docs: the Trainer on one V100 and DDP on two TITAN RTX
(docs/source/en/perf_train_gpu_one.mdx and perf_train_gpu_many.md; verbatim excerpts in
shared/data/public_raw/hf_transformers_perf_docs/EXCERPTS.md).

Normalisation:
- perf_train_gpu_one (bert-large-uncased, AutoModelForSequenceClassification, 512 random
  sequences of length 512, one epoch, Tesla V100-SXM2 16GB -> V100-16GB): step_time_s = global
  batch / train_samples_per_second, global batch = per-device batch x gradient accumulation.
  The Trainer's samples/s is 512 samples / train_runtime, so it includes the dataloader, the
  first steps, the optimizer and logging. Model: the catalog's bert-large (an encoder: the
  classification head is negligible). fp16=True -> amp_fp16 (torch.cuda.amp), else fp32 (V100 has
  no TF32); gradient_checkpointing -> activation_checkpointing; optim adamw (default) or
  adafactor; attention eager (BERT in transformers of early 2022 has no SDPA path).
  peak_memory_gb = nvidia-smi "GPU memory occupied" after training / 1000 (the caching
  allocator's reserved memory plus ~1.3 GB of CUDA context).
- perf_train_gpu_many (gpt2 124M, run_clm.py on wikitext-2-raw-v1, 200 steps, per-device batch 4,
  2x TITAN RTX, fp32): step_time_s = train_runtime / 200 (the published train_samples_per_second
  equals 200 / runtime: steps/s in that transformers version, not used). seq_len 1024: run_clm's
  default block size is min(tokenizer.model_max_length, 1024) = 1024 for gpt2, and the logged
  epoch 0.69 = 1600 samples / 2,318 blocks of 1024 GPT-2 tokens in wikitext-2-raw-v1's train
  split (512-token blocks would give 0.35). Kept: DDP with the NVLink bridge.
- Skipped with reasons: bitsandbytes 8-bit Adam (optimizer state precision is not expressible);
  torch.nn.DataParallel (one process scattering inputs and replicating the model every step: not
  a strategy the workload states); DDP with NCCL_P2P_DISABLE=1 (GPU traffic through host memory,
  an interconnect the workload cannot state).
"""

from __future__ import annotations

from pathlib import Path

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

GPU_KEYS: dict[str, str | None] = {
    "Tesla V100-SXM2 16GB": "V100-16GB",
    "TITAN RTX 24GB (NVLink NV2 pair)": "Titan-RTX",
}
OPTIMIZERS = {"adamw (Trainer default)": "adamw", "adafactor": "adafactor"}
STEPS_MANY = 200
"""max_steps of the perf_train_gpu_many runs."""
GPT2_BLOCK = 1024
"""run_clm.py's default block size for gpt2 (see the module docstring)."""


def import_hf_transformers_perf_docs(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        gpu = GPU_KEYS.get(r["gpu"])
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        if r["source"] == "hf_transformers_perf_train_gpu_one":
            _add_one(sink, r, gpu)
        elif r["source"] == "hf_transformers_perf_train_gpu_many":
            _add_many(sink, r, gpu)
        else:
            sink.skip(f"unknown table {r['source']}")
    return sink.result()


def _citation(r: dict) -> str:
    where = (
        f"section '{r['src_section']}'" if r["src_section"] else f"{r['src_type']} NVLink={r['src_nvlink']}"
    )
    return f"{r['citation_repo']}@{r['citation_commit']}:{r['citation_path']} ({where})"


def _add_one(sink: RowSink, r: dict, gpu: str) -> None:
    optimizer = OPTIMIZERS.get(r["optimizer"])
    if optimizer is None:
        sink.skip(f"optimizer not expressible (state precision): {r['optimizer']}")
        return
    micro, accum = parse_int(r["micro_batch_size"]), parse_int(r["grad_accum"])
    samples, seq = parse_number(r["samples_per_s"]), parse_int(r["seq_len"])
    checkpointing = parse_bool(r["activation_checkpointing"])
    memory_mb = parse_number(r["src_gpu_memory_occupied_mb"])
    if (
        not micro
        or not accum
        or not samples
        or not seq
        or checkpointing is None
        or r["precision"]
        not in (
            "fp32",
            "amp_fp16",
        )
    ):
        sink.skip("missing batch, accumulation, throughput, sequence length, checkpointing or precision")
        return
    gbs = micro * accum
    sink.add(
        config={"section": r["src_section"]},
        citation=_citation(r),
        notes=(
            f"step_time_s = global batch {gbs} / train_samples_per_second {samples:g} (Trainer: 512 samples / "
            "train_runtime, includes dataloader, first steps, optimizer, logging); bert-large-uncased "
            "AutoModelForSequenceClassification, 1 epoch of 512 random sequences of length 512; peak_memory_gb "
            "= nvidia-smi GPU memory occupied (incl. ~1.3 GB CUDA context); torch/transformers versions not stated"
        ),
        model=("bert-large", "bert", "encoder"),
        batch=Batch(micro, gbs, seq, accum),
        precision=r["precision"],
        optimizer=optimizer,
        activation_checkpointing=checkpointing,
        attention_kernel="eager",
        torch_compile=False,
        layout=Layout(gpu, 1, num_nodes=1, gpu_name_raw=r["gpu"]),
        framework="hf-eager",
        step_time_s=gbs / samples,
        samples_per_s=samples,
        peak_memory_gb=memory_mb / 1000 if memory_mb else None,
    )


def _add_many(sink: RowSink, r: dict, gpu: str) -> None:
    if r["src_type"] == "DP":
        sink.skip("torch.nn.DataParallel: not a strategy the workload can state")
        return
    if r["src_nvlink"] != "Y":
        sink.skip("NCCL_P2P_DISABLE=1 (GPU traffic through host memory): interconnect not expressible")
        return
    micro, gbs = parse_int(r["micro_batch_size"]), parse_int(r["global_batch_size"])
    runtime = parse_number(r["src_train_runtime"])
    n_gpus = parse_int(r["num_gpus"])
    if not micro or not gbs or not runtime or not n_gpus or gbs != micro * n_gpus:
        sink.skip("missing or inconsistent batch, GPU count or runtime")
        return
    step = runtime / STEPS_MANY
    sink.add(
        config={"type": r["src_type"], "nvlink": r["src_nvlink"]},
        citation=_citation(r),
        notes=(
            f"step_time_s = train_runtime {runtime:g} s / {STEPS_MANY} steps (includes start-up steps and "
            "data loading); seq_len 1024 = run_clm.py default block size for gpt2 (the logged epoch 0.69 = "
            "1600 samples / 2318 blocks of 1024 tokens); DDP over an NVLink bridge pair (NV2), the catalog's "
            "Titan-RTX link is PCIe; pytorch-1.8-to-be, cuda-11.0, transformers 4.3.0.dev0; fp32 (no --fp16)"
        ),
        model=("gpt2", "gpt2", "decoder"),
        batch=Batch(micro, gbs, GPT2_BLOCK),
        precision="fp32",
        optimizer="adamw",
        activation_checkpointing=False,
        attention_kernel="eager",
        torch_compile=False,
        layout=Layout(gpu, n_gpus, "ddp", num_nodes=1, gpu_name_raw=r["gpu"]),
        framework="hf-eager",
        torch_version="1.8 (pre-release)",
        step_time_s=step,
        measured_steps=STEPS_MANY,
    )
