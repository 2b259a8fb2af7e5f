"""NeuSight (ASPLOS'25) measured end-to-end latencies: many accelerator kinds, one software stack.

Normalisation:
- Training rows only (`mode=train`); inference and torch.compile (`-fusion`) rows are skipped.
- step_time_s = e2e_latency_ms / 1000: forward + loss.backward() of one batch, WITHOUT the
  optimizer step (includes_optimizer_step = False, optimizer 'none'); mean of the fastest 5 of 25
  iterations (single GPU) or fastest 10 of 50 (4-GPU rows).
- precision fp32 on every GPU: HF transformers in fp32 with no autocast, outside NGC, where
  PyTorch >= 1.12 leaves TF32 matmuls off by default.
- Single-GPU rows: framework hf-eager, micro = global batch = batch_size.
- attention_kernel 'eager' on every row: NeuSight traces HF transformers with eager attention
  (neusight/Tracing/trace.py, the shared README), and Megatron-LM's fp32 attention is its unfused
  core attention; both materialise the scores.
  4-GPU rows (Megatron-LM through HF accelerate, framework megatron): the batch is the global
  batch; dp4 -> ddp with micro = batch/4; tp4 -> tensor_parallel 4; pp4_1 -> pipeline_parallel 4
  with one micro-batch.
- Model dims from the file's config_* columns (NeuSight's DLmodel_configs); the rest (ffn, vocab)
  is filled from the catalog at build time. Switch Transformer rows are skipped (MoE
  encoder-decoder without a catalog entry).
"""

from __future__ import annotations

from pathlib import Path

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

GPU_KEYS: dict[str, str | None] = {
    "AMD_Instinct_MI100": "MI100",
    "AMD_Instinct_MI210": "MI210",
    "AMD_Instinct_MI250": "MI250",
    "NVIDIA_A100-PCIE-40GB": "A100-PCIe-40GB",
    "NVIDIA_A100-SXM4-40GB": "A100-40GB",
    "NVIDIA_A100_80GB_PCIe": "A100-PCIe-80GB",
    "NVIDIA_H100_80GB_HBM3": "H100-SXM",  # HBM3 80GB = the SXM5 part (the PCIe part has HBM2e)
    "NVIDIA_L4": "L4",
    "Tesla_P100-PCIE-16GB": "P100",
    "Tesla_P4": "P4",
    "Tesla_T4": "T4",
    "Tesla_V100-PCIE-32GB": "V100-PCIe-32GB",
}
# model -> (catalog key, family, arch)
MODELS: dict[str, tuple[str, str, str]] = {
    "bert_large": ("bert-large", "bert", "encoder"),
    "gpt2_large": ("gpt2-large", "gpt2", "decoder"),
    "gpt3_xl": ("gpt3-xl-neusight", "gpt", "decoder"),  # NeuSight's gpt3_xl is d_model 3072, not GPT-3 XL
    "gpt3_27": ("gpt3-2.7b", "gpt", "decoder"),
    "opt_13": ("opt-1.3b", "opt", "decoder"),
}


def import_neusight_measured_e2e_latency(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        if r["mode"] != "train":
            sink.skip("inference row")
            continue
        if r["option"] == "fusion":
            sink.skip("torch.compile (fusion) row")
            continue
        if r["model"] not in MODELS:
            sink.skip(f"model without a catalog entry: {r['model']}")
            continue
        if r["gpu"] not in GPU_KEYS:
            sink.skip(f"unrecognised gpu: {r['gpu']}")
            continue
        gpu = GPU_KEYS[r["gpu"]]
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        latency_ms = parse_number(r["e2e_latency_ms"])
        batch = parse_int(r["batch_size"])
        seq = parse_int(r["seq_len"])
        n_gpus = parse_int(r["n_gpus"]) or 1
        if not latency_ms or not batch or not seq:
            sink.skip("missing latency, batch or sequence length")
            continue
        option = r["option"]
        tp = pp = 1
        micro = batch
        strategy = "ddp"
        framework = "hf-eager"
        if option == "dp4":
            if batch % 4:
                sink.skip("dp4 batch not divisible by 4")
                continue
            micro, framework = batch // 4, "megatron"
        elif option == "tp4":
            tp, framework = 4, "megatron"
        elif option == "pp4_1":
            pp, framework = 4, "megatron"
        elif option:
            sink.skip(f"unknown option {option}")
            continue
        d = parse_int(r["config_d_model"])
        heads = parse_int(r["config_n_heads"])
        notes = (
            f"step_time_s = e2e_latency_ms/1000 = fwd+bwd without optimizer step ({r['notes']}); "
            f"{r['parallelism']}; {r['precision']}"
        )
        sink.add(
            config={"gpu": r["gpu"], "model": r["model"], "seq": seq, "batch": batch, "option": option},
            citation=r["source"],
            hardware_id=r["gpu"],
            notes=notes,
            model=MODELS[r["model"]],
            hidden_size=d,
            num_layers=parse_int(r["config_n_layers"]),
            num_heads=heads,
            num_kv_heads=heads,
            batch=Batch(micro, batch, seq),
            precision="fp32",
            optimizer="none",
            includes_optimizer_step=False,
            activation_checkpointing=False,
            layout=Layout(gpu, n_gpus, strategy, tp, pp, num_nodes=1, gpu_name_raw=r["gpu"]),
            framework=framework,
            attention_kernel="eager",
            step_time_s=latency_ms / 1000,
        )
    return sink.result()
