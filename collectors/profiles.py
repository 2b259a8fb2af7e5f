"""Collection profiles: which configurations to measure, in what order, under what budget.

- `quick`: every model kind, two precisions, activation checkpointing, LoRA, AdamW and SGD, with
  models small enough that a 2-core CPU finishes in under 5 minutes.
- `gpu`: single-GPU fine-tuning on an H100/H200-class device, ~60M to 7B parameters (7B full
  fine-tuning in bf16 and 7B LoRA with a frozen bf16 base), sequences 256-8192, micro-batches
  1-64, every precision; designed for < 8 minutes. Ordered so the most informative
  configurations run first (a coverage pass over every family and scale, then precision,
  sequence and batch sweeps, then checkpointing/LoRA/optimizer variants, then memory-edge
  probes), so a budget cut keeps the best data.
- `full`: the device's grid plus broader sweeps (hours on a CPU, ~1 hour on a GPU).

One configuration per profile is repeated (repeat_index 1..k, spread over the run) to measure
run-to-run noise.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass

from collectors.kernel_bench import GPU_SIZES, plan_entries
from collectors.microbench import MicrobenchPlan
from perfmodel.errors import ConfigError
from perfmodel.measure.configs import SliceConfig

PROFILES = ("quick", "gpu", "full")


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A named, ordered list of configurations with its budget."""

    name: str
    """quick | gpu | full."""
    configs: tuple[SliceConfig, ...]
    """Configurations in the order they run."""
    microbench: MicrobenchPlan | None
    """Micro-benchmarks run first (None: none)."""
    budget_s: float
    """Default wall-time budget of the whole collection in seconds."""
    max_config_s: float | None = None
    """Skip a configuration whose measured steps are projected to take longer than this."""
    flush_every: int = 4
    """Write a shard after this many configurations."""


# --- model shapes ------------------------------------------------------------------------------


def llama(d: int, layers: int, heads: int, kv: int, ffn: int, vocab: int = 32000, **kw: object) -> SliceConfig:
    kw.setdefault("micro_batch_size", 1)
    return SliceConfig(kind="llama", hidden_size=d, num_layers=layers, num_heads=heads, num_kv_heads=kv,
                       ffn_hidden_size=ffn, vocab_size=vocab, **kw)  # type: ignore[arg-type]


def bert(d: int, layers: int, heads: int, ffn: int, vocab: int = 30522, **kw: object) -> SliceConfig:
    kw.setdefault("micro_batch_size", 1)
    return SliceConfig(kind="bert", hidden_size=d, num_layers=layers, num_heads=heads, ffn_hidden_size=ffn,
                       vocab_size=vocab, num_classes=2, **kw)  # type: ignore[arg-type]


def resnet(width: int, blocks: tuple[int, ...], bottleneck: bool, image: int, classes: int = 1000, **kw: object) -> SliceConfig:
    kw.setdefault("micro_batch_size", 1)
    return SliceConfig(kind="resnet", cnn_width=width, cnn_blocks=blocks, cnn_bottleneck=bottleneck,
                       image_size=image, num_classes=classes, **kw)  # type: ignore[arg-type]


def mlp(features: int, width: int, layers: int, **kw: object) -> SliceConfig:
    kw.setdefault("micro_batch_size", 1)
    return SliceConfig(kind="mlp", in_features=features, hidden_size=width, num_layers=layers, num_classes=2, **kw)  # type: ignore[arg-type]


def gbm(rows: int, features: int, rounds: int = 10, **kw: object) -> SliceConfig:
    return SliceConfig(kind="lightgbm", micro_batch_size=rows, in_features=features, measured_steps=rounds, **kw)  # type: ignore[arg-type]


def _v(base: SliceConfig, **changes: object) -> SliceConfig:
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def with_repeats(configs: list[SliceConfig], noisy: SliceConfig, k: int) -> list[SliceConfig]:
    """Insert k repeats of `noisy` (repeat_index 1..k) spread evenly after its first run."""
    out = list(configs)
    n = len(out)
    for i in range(k, 0, -1):  # from the back, so earlier positions stay valid
        out.insert(round(n * i / k), _v(noisy, repeat_index=i))
    return out


def _dedupe(configs: Iterable[SliceConfig]) -> list[SliceConfig]:
    seen, out = set(), []
    for c in configs:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


# --- quick (CPU-sized) -------------------------------------------------------------------------


def quick_configs() -> list[SliceConfig]:
    w = 3  # CPU step times still fall over the first steps: three warm-up steps
    tiny = llama(256, 4, 8, 2, 688, vocab=8000, seq_len=256, micro_batch_size=4, warmup_steps=w)
    enc = bert(256, 4, 4, 1024, vocab=8000, seq_len=128, micro_batch_size=8, warmup_steps=w)
    cnn = resnet(16, (1, 1, 1, 1), False, 64, classes=100, micro_batch_size=16, warmup_steps=w)
    cnn_bn = resnet(32, (2, 2, 2, 2), True, 96, classes=100, micro_batch_size=8, warmup_steps=w)
    tab = mlp(64, 512, 4, micro_batch_size=512, warmup_steps=w)
    configs = [
        tiny, enc, cnn, tab, gbm(20_000, 32),
        _v(tiny, precision="amp_bf16"), _v(enc, precision="amp_bf16"), _v(cnn, precision="amp_bf16"),
        _v(tab, precision="amp_bf16"),
        _v(tiny, activation_checkpointing=True), _v(tiny, lora_r=8), _v(tiny, optimizer="sgd"),
        _v(tab, precision="bf16"),  # pure bf16 on a small model: bf16 transformer steps are slow on CPUs
        _v(tiny, seq_len=128, micro_batch_size=8), _v(tiny, seq_len=512, micro_batch_size=2),
        llama(384, 6, 6, 6, 1024, vocab=8000, seq_len=256, micro_batch_size=2, warmup_steps=w),
        llama(128, 2, 4, 4, 344, vocab=8000, seq_len=256, micro_batch_size=4, warmup_steps=w),
        _v(enc, lora_r=8), _v(enc, seq_len=64, micro_batch_size=16), _v(enc, optimizer="sgd"),
        cnn_bn, _v(cnn, activation_checkpointing=True), _v(cnn, optimizer="sgd"), _v(cnn, micro_batch_size=32),
        _v(tab, optimizer="sgd"), mlp(64, 1024, 4, micro_batch_size=1024, warmup_steps=w),
        gbm(50_000, 64), gbm(10_000, 16),
    ]
    return with_repeats(configs, tiny, 2)


def quick_microbench(kind: str) -> MicrobenchPlan:
    if kind == "cuda":
        return MicrobenchPlan(matmul_sizes=(1024, 4096), copy_mb=(256,), attention_shapes=((4, 16, 1024, 64),),
                              attention_dtypes=("bf16",), host_copy_mb=(256,), iters=5)
    return MicrobenchPlan(matmul_sizes=(256, 512, 1024), copy_mb=(64,),
                          attention_shapes=((1, 8, 512, 64), (2, 8, 1024, 64)), attention_dtypes=("fp32", "bf16"), iters=5,
                          sample_target_s=0.05)


# --- gpu (H100/H200-class) ---------------------------------------------------------------------

W = 3  # GPU warm-up: the first step pays allocator growth, cuBLAS heuristics, kernel caches


def gpu_configs() -> list[SliceConfig]:
    kw = {"warmup_steps": W}
    l60m = llama(512, 8, 8, 8, 1408, **kw)
    l160m = llama(768, 12, 12, 12, 2048, **kw)
    l410m = llama(1024, 24, 16, 16, 2816, **kw)
    l1b = llama(2048, 22, 32, 4, 5632, **kw)  # TinyLlama-1.1B shape
    l3b = llama(3072, 28, 24, 8, 8192, **kw)  # Llama-3.2-3B-like shape, 32k vocabulary
    l7b = llama(4096, 32, 32, 32, 11008, **kw)  # Llama-2-7B shape
    bert_base = bert(768, 12, 12, 3072, **kw)
    bert_large = bert(1024, 24, 16, 4096, **kw)
    r50 = resnet(64, (3, 4, 6, 3), True, 224, **kw)
    r18 = resnet(64, (2, 2, 2, 2), False, 224, **kw)
    tab = mlp(256, 1024, 4, **kw)

    anchor_small = _v(l160m, seq_len=1024, micro_batch_size=8, precision="amp_bf16")
    anchor_1b = _v(l1b, seq_len=2048, micro_batch_size=4, precision="amp_bf16")
    coverage = [
        anchor_small,
        anchor_1b,
        _v(l7b, seq_len=1024, micro_batch_size=4, precision="bf16", lora_r=16),
        _v(l7b, seq_len=2048, micro_batch_size=2, precision="bf16"),
        _v(l3b, seq_len=2048, micro_batch_size=4, precision="bf16"),
        _v(l60m, seq_len=512, micro_batch_size=32, precision="amp_bf16"),
        _v(l410m, seq_len=1024, micro_batch_size=16, precision="amp_bf16"),
        _v(bert_base, seq_len=512, micro_batch_size=32, precision="amp_bf16"),
        _v(r50, micro_batch_size=64, precision="amp_bf16"),
        _v(tab, micro_batch_size=4096, precision="amp_bf16"),
        gbm(1_000_000, 64),
        _v(anchor_1b, activation_checkpointing=True),
        _v(l7b, seq_len=4096, micro_batch_size=1, precision="bf16", lora_r=16, activation_checkpointing=True),
    ]
    precisions = [
        _v(l410m, seq_len=1024, micro_batch_size=8, precision=p)
        for p in ("amp_bf16", "bf16", "fp32", "tf32", "amp_fp16", "fp16")
    ] + [_v(r50, micro_batch_size=64, precision=p) for p in ("fp32", "tf32", "amp_fp16", "bf16")]
    shapes = (
        [_v(l1b, seq_len=s, micro_batch_size=max(1, 8192 // s), precision="amp_bf16") for s in (256, 512, 1024, 4096, 8192)]
        + [_v(l160m, seq_len=512, micro_batch_size=b, precision="amp_bf16") for b in (1, 4, 16, 64)]
        + [_v(l7b, seq_len=s, micro_batch_size=b, precision="bf16", lora_r=16) for s, b in ((256, 16), (512, 8), (2048, 2), (8192, 1))]
        + [_v(l7b, seq_len=512, micro_batch_size=b, precision="bf16", lora_r=16) for b in (1, 32)]
        + [_v(bert_base, seq_len=s, micro_batch_size=b, precision="amp_bf16") for s, b in ((128, 64), (256, 32))]
        + [_v(r50, micro_batch_size=b, precision="amp_bf16") for b in (16, 32)]
    )
    variants = [
        _v(l410m, seq_len=1024, micro_batch_size=8, precision="amp_bf16", optimizer="sgd"),
        _v(l1b, seq_len=2048, micro_batch_size=4, precision="amp_bf16", optimizer="sgd"),
        _v(l410m, seq_len=1024, micro_batch_size=8, precision="amp_bf16", activation_checkpointing=True),
        _v(l160m, seq_len=1024, micro_batch_size=8, precision="amp_bf16", lora_r=16),
        _v(l1b, seq_len=2048, micro_batch_size=4, precision="bf16", lora_r=16),
        _v(l1b, seq_len=2048, micro_batch_size=4, precision="amp_bf16", lora_r=16),
        _v(l3b, seq_len=2048, micro_batch_size=4, precision="bf16", activation_checkpointing=True),
        _v(l7b, seq_len=4096, micro_batch_size=2, precision="bf16", activation_checkpointing=True),
        _v(l7b, seq_len=1024, micro_batch_size=4, precision="amp_bf16", lora_r=16),
        _v(bert_base, seq_len=512, micro_batch_size=32, precision="amp_bf16", lora_r=16),
        _v(bert_large, seq_len=512, micro_batch_size=16, precision="amp_bf16"),
        _v(bert_base, seq_len=512, micro_batch_size=32, precision="fp32"),
        _v(r18, micro_batch_size=128, precision="amp_bf16"),
        _v(r50, micro_batch_size=64, precision="amp_bf16", activation_checkpointing=True),
        _v(r50, micro_batch_size=64, precision="amp_bf16", optimizer="sgd"),
        _v(r50, micro_batch_size=64, precision="amp_bf16", channels_last=True),
        _v(r18, micro_batch_size=128, precision="amp_bf16", channels_last=True),
        _v(tab, micro_batch_size=1024, precision="fp32"),
        mlp(256, 4096, 6, micro_batch_size=4096, precision="amp_bf16", **kw),
        gbm(100_000, 32),
        gbm(4_000_000, 16),
        gbm(1_000_000, 256),
    ]
    memory_edge = [  # where a GPU stops fitting: runs and fails with a real OOM, or is predicted
        _v(l7b, seq_len=4096, micro_batch_size=4, precision="bf16"),
        _v(l7b, seq_len=2048, micro_batch_size=8, precision="amp_bf16"),
        _v(l7b, seq_len=8192, micro_batch_size=8, precision="bf16"),
        _v(l3b, seq_len=8192, micro_batch_size=4, precision="amp_bf16"),
    ]
    configs = _dedupe([*coverage, *precisions, *shapes, *variants, *memory_edge])
    return with_repeats(configs, anchor_1b, 2)


def gpu_microbench() -> MicrobenchPlan:
    return MicrobenchPlan(
        matmul_sizes=(1024, 2048, 4096, 8192, 16384),
        copy_mb=(256, 1024, 4096),
        attention_shapes=((8, 16, 512, 64), (4, 32, 1024, 128), (2, 32, 2048, 128), (1, 32, 4096, 128), (1, 32, 8192, 128)),
        attention_dtypes=("bf16", "fp16"),
        host_copy_mb=(64, 1024),
        all_reduce_mb=(64, 1024),
        kernels=plan_entries(GPU_SIZES),
        iters=10,
    )


# --- full --------------------------------------------------------------------------------------


def full_cpu_configs() -> list[SliceConfig]:
    w = 3
    out = list(quick_configs())
    for d, layers, heads in ((256, 4, 8), (512, 6, 8), (768, 8, 12)):
        base = llama(d, layers, heads, max(1, heads // 4), int(8 * d / 3) // 8 * 8, vocab=16000, warmup_steps=w)
        for s, b in ((128, 8), (256, 4), (512, 2), (1024, 1)):
            for p in ("fp32", "amp_bf16", "bf16"):
                out.append(_v(base, seq_len=s, micro_batch_size=b, precision=p))
        out += [_v(base, seq_len=256, micro_batch_size=4, activation_checkpointing=True),
                _v(base, seq_len=256, micro_batch_size=4, lora_r=8)]
    for d, layers in ((256, 4), (512, 8)):
        base = bert(d, layers, d // 64, 4 * d, warmup_steps=w)
        out += [_v(base, seq_len=s, micro_batch_size=b, precision=p)
                for s, b in ((64, 32), (128, 16), (256, 8)) for p in ("fp32", "amp_bf16")]
    for image, b in ((64, 32), (128, 8), (224, 4)):
        out += [resnet(64, (2, 2, 2, 2), False, image, micro_batch_size=b, warmup_steps=w),
                resnet(32, (3, 4, 6, 3), True, image, micro_batch_size=b, warmup_steps=w)]
    out += [mlp(f, wd, n, micro_batch_size=b, warmup_steps=w) for f in (32, 256) for wd, n in ((256, 2), (1024, 4)) for b in (256, 2048)]
    out += [gbm(r, f) for r in (10_000, 100_000, 500_000) for f in (16, 64, 256)]
    return _dedupe(out)


def full_gpu_configs() -> list[SliceConfig]:
    out = list(gpu_configs())
    kw = {"warmup_steps": W}
    shapes = {
        "60m": llama(512, 8, 8, 8, 1408, **kw),
        "410m": llama(1024, 24, 16, 16, 2816, **kw),
        "1b": llama(2048, 22, 32, 4, 5632, **kw),
        "3b": llama(3072, 28, 24, 8, 8192, **kw),
    }
    for base in shapes.values():
        for s in (256, 1024, 4096, 8192):
            for b in (1, 4, 16, 64):
                if s * b <= 65536:
                    out.append(_v(base, seq_len=s, micro_batch_size=b, precision="amp_bf16"))
    l7b = llama(4096, 32, 32, 32, 11008, **kw)
    for s in (256, 1024, 4096, 8192):
        for b in (1, 4, 16):
            if s * b <= 32768:
                out.append(_v(l7b, seq_len=s, micro_batch_size=b, precision="bf16", lora_r=16))
                out.append(_v(l7b, seq_len=s, micro_batch_size=b, precision="bf16", lora_r=16, activation_checkpointing=True))
    r50 = resnet(64, (3, 4, 6, 3), True, 224, **kw)
    out += [_v(r50, micro_batch_size=b, precision=p) for b in (8, 128, 256) for p in ("amp_bf16", "tf32")]
    out += [_v(r50, micro_batch_size=b, precision="amp_bf16", channels_last=True) for b in (8, 128, 256)]
    out += [gbm(r, f) for r in (100_000, 1_000_000, 10_000_000) for f in (16, 64, 256)]
    return _dedupe(out)


# --- building ----------------------------------------------------------------------------------


def build_profile(name: str, device_kind: str, supports: object = None) -> Profile:
    """The profile `name` for a device of `device_kind` ('cpu' or 'cuda'). `supports` (a
    callable precision -> bool, e.g. Device.supports) drops configurations the device cannot run."""
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    if name == "quick":
        profile = Profile(name=name, configs=tuple(quick_configs()), microbench=quick_microbench(device_kind),
                          budget_s=240.0, max_config_s=60.0, flush_every=4)
    elif name == "gpu":
        if device_kind != "cuda":
            raise ConfigError("profile 'gpu' needs a CUDA device (none found); use --profile quick or full on a CPU")
        profile = Profile(name=name, configs=tuple(gpu_configs()), microbench=gpu_microbench(),
                          budget_s=420.0, max_config_s=30.0, flush_every=4)
    elif device_kind == "cuda":
        profile = Profile(name=name, configs=tuple(full_gpu_configs()), microbench=gpu_microbench(),
                          budget_s=3600.0, max_config_s=60.0, flush_every=4)
    else:
        profile = Profile(name=name, configs=tuple(full_cpu_configs()), microbench=quick_microbench("cpu"),
                          budget_s=3600.0, max_config_s=120.0, flush_every=4)
    if callable(supports):
        keep = tuple(c for c in profile.configs if c.kind == "lightgbm" or supports(c.precision))
        profile = dataclasses.replace(profile, configs=keep)
    if importlib.util.find_spec("lightgbm") is None:  # e.g. a GPU image without it: no GBM slices there
        profile = dataclasses.replace(profile, configs=tuple(c for c in profile.configs if c.kind != "lightgbm"))
    return profile
