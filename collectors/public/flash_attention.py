"""Dao-AILab/flash-attention training/README.md: GPT-3 125M-2.7B on The Pile, one node of 8x
A100 80GB SXM4 (400 W, NVLink), sequence length 2048, the repository's own training scripts
(PyTorch Lightning + Hydra, FlashAttention with fused dense / MLP / dropout-add-LayerNorm and
Apex cross-entropy kernels).

The table gives the batch in tokens and the total throughput; the rest is in the experiment
configs the README names (`python run.py experiment=pile/<name> trainer.devices=8`, "The default
parameters are set for 8 x A100 80GB"), read at the commits cited in CONFIGS:
- micro-batch per GPU from the config's `gpu_mem` branch for an 80 GB card (nvidia-smi reports
  81920 MiB -> gpu_mem 82 >= 80); gradient accumulation = global batch / (8 x micro-batch);
- global batch 256 sequences (0.5M tokens) for 125M/355M/760M, 512 (1M) for 1.3B/2.7B, as in
  the table;
- strategy: Lightning DDP for 125M/355M, DDP + ZeRO-1 (DDPStrategyZero1, ZeroRedundancyOptimizer)
  for 760M/1.3B/2.7B; optimizer AdamW (Apex FusedAdam); `trainer.precision: bf16` = Lightning's
  bf16 autocast with fp32 weights -> amp_bf16; no activation checkpointing ("we don't need any
  activation checkpointing"; mlp_checkpoint_lvl 0);
- model: GPT-2 style (learned positions 2048, tied embeddings, vocab 50257 padded to a multiple
  of 8 = 50264, MLP 4d); dims per config (2.7B uses head dim 128: 20 heads of 128, not 32 of 80).

step_time_s = global batch x 2048 / total tokens/s. framework: none of perfmodel's families fits
(custom fused CUDA kernels, no torch.compile, not Megatron): recorded as the closest,
`torch-eager`, with the stack in notes; attention_kernel 'flash'.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_number, read_csv

GPU_KEYS: dict[str, str | None] = {"A100 80GB SXM4 (400W), NVLink": "A100-80GB"}
SEQ_LEN = 2048
VOCAB_PADDED = 50264
"""GPT2Config vocab 50257 padded to a multiple of 8 (pad_vocab_size_multiple: 8)."""
REPO = "Dao-AILab/flash-attention"


class Config(NamedTuple):
    """One experiment config of training/configs/experiment/pile/."""

    name: str
    """Model name in the feature table."""
    hidden_size: int
    num_layers: int
    num_heads: int
    micro_batch_size: int
    """Per-GPU batch for an 80 GB card."""
    global_batch_size: int
    strategy: str
    config_path: str
    config_commit: str


CONFIGS: dict[str, Config] = {
    "GPT3-125M": Config("gpt3-125m", 768, 12, 12, 32, 256, "ddp", "gpt3s-flash.yaml", "0b037c2d"),
    "GPT3-355M": Config("gpt3-355m", 1024, 24, 16, 16, 256, "ddp", "gpt3m-flash.yaml", "0bf5e500"),
    "GPT3-760M": Config("gpt3-760m", 1536, 24, 16, 16, 256, "zero1", "gpt3l-flash.yaml", "edc7698f"),
    "GPT3-1.3B": Config("gpt3-xl", 2048, 24, 16, 8, 512, "zero1", "gpt3xl-flash.yaml", "0b037c2d"),
    "GPT3-2.7B": Config(
        "gpt3-2.7b-hdim128", 2560, 32, 20, 4, 512, "zero1", "gpt3-2.7B-flash-hdim128.yaml", "4a6eaa9f"
    ),
}
"""Table model -> its experiment config (dims from configs/model/gpt2model/*.yaml or the
experiment's n_embd/n_head/n_layer; batch from the datamodule.batch_size expression)."""


def import_flash_attention_training_speed(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        cfg = CONFIGS.get(r["model"])
        if cfg is None:
            sink.skip(f"model without a config: {r['model']}")
            continue
        gpu = GPU_KEYS.get(r["gpu"])
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        tokens_per_s = parse_number(r["tokens_per_s"])
        batch_tokens = parse_number(r["src_batch_size_tokens"])
        n_gpus = int(parse_number(r["num_gpus"]) or 0)
        if not tokens_per_s or n_gpus != 8 or parse_number(r["seq_len"]) != SEQ_LEN:
            sink.skip("missing throughput, or not 8 GPUs at sequence length 2048")
            continue
        # The table's batch (0.5M / 1M tokens) must be the config's global batch x 2048.
        if batch_tokens is None or abs(batch_tokens - cfg.global_batch_size * SEQ_LEN) > 0.05 * batch_tokens:
            sink.skip("table batch disagrees with the config's global batch")
            continue
        accum = cfg.global_batch_size // (n_gpus * cfg.micro_batch_size)
        step = cfg.global_batch_size * SEQ_LEN / tokens_per_s
        sink.add(
            config={"model": r["model"], "row": r["src_raw_row"]},
            citation=f"{REPO}@{r['citation_commit']}:{r['citation_path']} (table 'GPT3 (sequence length 2048)')",
            hardware_id="8x A100 80GB SXM4 400W NVLink",
            notes=(
                f"step_time_s = {cfg.global_batch_size}*{SEQ_LEN}/{tokens_per_s:g} tokens/s (total over 8 GPUs); "
                f"micro-batch {cfg.micro_batch_size} x accumulation {accum} from "
                f"{REPO}@{cfg.config_commit}:training/configs/experiment/pile/{cfg.config_path} (80 GB branch); "
                f"{cfg.strategy}; Lightning bf16 autocast; FlashAttention + fused dense/MLP/LN + Apex xentropy "
                "(PyTorch Lightning scripts, recorded as torch-eager: no closer framework family)"
            ),
            model=(cfg.name, "gpt3"),
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_layers,
            num_heads=cfg.num_heads,
            num_kv_heads=cfg.num_heads,
            ffn_hidden_size=4 * cfg.hidden_size,
            vocab_size=VOCAB_PADDED,
            gated_mlp=False,
            tied_embeddings=True,
            learned_pos_embeddings=SEQ_LEN,
            batch=Batch(cfg.micro_batch_size, cfg.global_batch_size, SEQ_LEN, accum),
            layout=Layout(gpu, n_gpus, cfg.strategy, num_nodes=1, gpu_name_raw=r["gpu"]),
            precision="amp_bf16",
            optimizer="adamw",
            activation_checkpointing=False,
            attention_kernel="flash",
            torch_compile=False,
            framework="torch-eager",
            step_time_s=step,
            tokens_per_s=tokens_per_s,
        )
    return sink.result()
