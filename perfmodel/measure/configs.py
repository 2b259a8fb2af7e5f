"""One training-slice configuration: what model, what shapes, what training settings.

Torch-free, so profiles can be built and inspected (and OOM predicted) without loading torch.
`row_id` is a hash of (hardware_id, every field but repeat_index, repeat_index): the same
configuration measured again on the same hardware gets the same id, which is how a re-run knows
what it has already measured; `make_run_group` (the repeat-0 row_id) is what noise repeats of
one configuration share.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfmodel.analytic.memory import estimate_memory
from perfmodel.codec import workload_from_row
from perfmodel.workload import GPUSpec

KINDS = ("llama", "bert", "resnet", "mlp", "lightgbm")
FAMILY_ARCH = {"llama": "decoder", "bert": "encoder", "resnet": "cnn", "mlp": "mlp", "lightgbm": "gbm"}
SLICE_PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16", "bf16", "fp16")
SLICE_OPTIMIZERS = ("adamw", "sgd")

LUDWIG_GBM_PARAMS: dict[str, Any] = {
    # Ludwig's GBM trainer defaults (ludwig/schema/trainer.py, GBMTrainerConfig), so GBM slices
    # time what a Ludwig GBM model does per boosting round.
    "objective": "binary",
    "boosting_type": "gbdt",
    "learning_rate": 0.03,
    "num_leaves": 82,
    "max_depth": 18,
    "min_data_in_leaf": 20,
    "min_sum_hessian_in_leaf": 1e-3,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "bagging_seed": 3,
    "feature_fraction": 0.75,
    "feature_fraction_seed": 2,
    "lambda_l1": 0.25,
    "lambda_l2": 0.2,
    "min_gain_to_split": 0.03,
    "max_bin": 255,
    "tree_learner": "serial",
    "verbose": -1,
}


if TYPE_CHECKING:
    from perfmodel.analytic.memory import MemoryBreakdown


@dataclass(frozen=True, kw_only=True)
class SliceConfig:
    """One configuration to measure. Fields that do not apply to a kind stay None."""

    kind: str
    """llama | bert | resnet | mlp | lightgbm."""
    micro_batch_size: int
    """Samples per step (GBM: rows, the whole data set per boosting round; one step = one
    boosting round, so measured_steps are the timed rounds)."""
    hidden_size: int | None = None
    """Transformer width d; MLP layer width."""
    num_layers: int | None = None
    """Transformer blocks; MLP hidden layers."""
    num_heads: int | None = None
    """Attention heads."""
    num_kv_heads: int | None = None
    """Key/value heads (grouped-query attention, llama)."""
    ffn_hidden_size: int | None = None
    """MLP inner width of a transformer block."""
    vocab_size: int | None = None
    """Vocabulary size."""
    seq_len: int | None = None
    """Tokens per sample (transformers)."""
    image_size: int | None = None
    """Square input side in pixels (resnet)."""
    cnn_width: int | None = None
    """Channels of the first stage (resnet; 64 in ResNet-50)."""
    cnn_blocks: tuple[int, ...] | None = None
    """Residual blocks per stage (resnet; (3, 4, 6, 3) in ResNet-50)."""
    cnn_bottleneck: bool = True
    """Bottleneck blocks (ResNet-50 style) instead of basic blocks (ResNet-18 style)."""
    in_features: int | None = None
    """Input features (mlp, lightgbm)."""
    num_classes: int | None = None
    """Output classes (bert, resnet, mlp)."""
    cpu_threads: int | None = None
    """LightGBM threads (None = every core this process may use)."""
    precision: str = "fp32"
    """One of SLICE_PRECISIONS."""
    optimizer: str = "adamw"
    """adamw | sgd (GBM: ignored)."""
    activation_checkpointing: bool = False
    """torch.utils.checkpoint around every block."""
    channels_last: bool = False
    """ResNet only: model and images in torch.channels_last (NHWC); the workload's
    training.channels_last. Left out of the identity when off, so the row ids of every earlier
    configuration stay what they were."""
    lora_r: int | None = None
    """LoRA rank on the attention q and v projections, base frozen; None = full fine-tuning."""
    warmup_steps: int = 2
    """Steps run before timing (excluded)."""
    measured_steps: int = 10
    """Steps timed (>= 10)."""
    repeat_index: int = 0
    """0 for the first measurement, 1..k for noise repeats of the same configuration."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"SliceConfig.kind must be one of {KINDS}; got {self.kind!r}")
        if self.precision not in SLICE_PRECISIONS:
            raise ValueError(
                f"SliceConfig.precision must be one of {SLICE_PRECISIONS}; got {self.precision!r}"
            )
        if self.optimizer not in SLICE_OPTIMIZERS:
            raise ValueError(
                f"SliceConfig.optimizer must be one of {SLICE_OPTIMIZERS}; got {self.optimizer!r}"
            )
        if self.measured_steps < 10:
            raise ValueError(f"SliceConfig.measured_steps must be >= 10; got {self.measured_steps}")
        if self.warmup_steps < 1:
            raise ValueError(f"SliceConfig.warmup_steps must be >= 1; got {self.warmup_steps}")
        if self.micro_batch_size < 1:
            raise ValueError(f"SliceConfig.micro_batch_size must be >= 1; got {self.micro_batch_size}")
        if self.channels_last and self.kind != "resnet":
            raise ValueError(f"SliceConfig.channels_last applies to resnet slices only; got kind {self.kind!r}")

    @property
    def family(self) -> str:
        return self.kind

    @property
    def arch(self) -> str:
        return FAMILY_ARCH[self.kind]

    @property
    def is_transformer(self) -> bool:
        return self.kind in ("llama", "bert")

    @property
    def model_name(self) -> str:
        if self.is_transformer:
            return f"slice-{self.kind}-d{self.hidden_size}-l{self.num_layers}"
        if self.kind == "resnet":
            blocks = "".join(str(b) for b in self.cnn_blocks or ())
            style = "bn" if self.cnn_bottleneck else "basic"
            return f"slice-resnet-{style}{blocks}-w{self.cnn_width}"
        if self.kind == "mlp":
            return f"slice-mlp-f{self.in_features}-w{self.hidden_size}-l{self.num_layers}"
        return f"slice-lightgbm-f{self.in_features}"

    def key(self) -> dict[str, Any]:
        """Every field except repeat_index: the configuration's identity."""
        data = dataclasses.asdict(self)
        data.pop("repeat_index")
        if not data["channels_last"]:
            data.pop("channels_last")
        return data

    def describe(self) -> str:
        """A short human label for progress output."""
        parts = [self.model_name]
        if self.seq_len:
            parts.append(f"s{self.seq_len}")
        if self.image_size:
            parts.append(f"i{self.image_size}")
        parts.append(f"mb{self.micro_batch_size}")
        if self.kind != "lightgbm":
            parts.append(self.precision)
            parts.append(self.optimizer)
        if self.activation_checkpointing:
            parts.append("ckpt")
        if self.channels_last:
            parts.append("channels_last")
        if self.lora_r:
            parts.append(f"lora{self.lora_r}")
        if self.repeat_index:
            parts.append(f"rep{self.repeat_index}")
        return " ".join(parts)


def make_row_id(hardware_id: str, config: SliceConfig, device_kind: str = "cpu") -> str:
    """Stable hash of (hardware_id, device kind, configuration, repeat_index). The device kind
    keeps CPU and GPU measurements of one configuration on a GPU host apart; LightGBM slices
    always run on the CPU."""
    device_kind = "cpu" if config.kind == "lightgbm" else device_kind
    payload = json.dumps(
        {
            "hardware_id": hardware_id,
            "device": device_kind,
            "config": config.key(),
            "repeat_index": config.repeat_index,
        },
        sort_keys=True,
        default=list,
    )
    return "own-" + hashlib.sha256(payload.encode()).hexdigest()[:20]


def make_run_group(hardware_id: str, config: SliceConfig, device_kind: str = "cpu") -> str:
    """The feature table's run_group of a measurement: the row_id of the configuration's first
    measurement (repeat_index 0), so noise repeats of one configuration on one host share it."""
    return make_row_id(hardware_id, dataclasses.replace(config, repeat_index=0), device_kind)


def row_fields(config: SliceConfig) -> dict[str, Any]:
    """The feature-table fields (perfmodel.schema.COLUMNS) a configuration fixes before anything
    is measured: model, shapes, training settings, parallel layout. perfmodel.measure.slices.slice_row
    adds the measurement; collectors.plan predicts from the same fields."""
    is_gbm = config.kind == "lightgbm"
    tf = config.is_transformer
    # bert slices have a learned position table of max(seq_len, 512) rows (transformer_params)
    positions = 0 if config.kind == "llama" else max(config.seq_len or 0, 512)
    return {
        "model_name": config.model_name,
        "model_family": config.family,
        "arch": config.arch,
        "hidden_size": config.hidden_size if tf else None,
        "num_layers": config.num_layers if tf else None,
        "num_heads": config.num_heads if tf else None,
        "num_kv_heads": (config.num_kv_heads or config.num_heads) if tf else None,
        "ffn_hidden_size": config.ffn_hidden_size if tf else None,
        "vocab_size": config.vocab_size if tf else None,
        "gated_mlp": (config.kind == "llama") if tf else None,
        "tied_embeddings": False if tf else None,  # untied LM head (llama), no LM head (bert)
        "learned_pos_embeddings": positions if tf else None,
        "num_experts": 1 if tf else None,
        "experts_per_token": 1 if tf else None,
        "gbm_rows": config.micro_batch_size if is_gbm else None,
        "gbm_features": config.in_features if is_gbm else None,
        "gbm_rounds": config.measured_steps + config.warmup_steps if is_gbm else None,
        "seq_len": config.seq_len if tf else None,
        "micro_batch_size": config.micro_batch_size,
        "grad_accum_steps": 1,
        "global_batch_size": config.micro_batch_size,
        "precision": "fp32" if is_gbm else config.precision,
        "optimizer": None if is_gbm else config.optimizer,
        "activation_checkpointing": None if is_gbm else config.activation_checkpointing,
        "lora_r": config.lora_r,
        "lora_target_modules": 2 if config.lora_r else None,  # q and v (lora_params)
        "quantization_bits": None,
        "fused_cross_entropy": None if is_gbm else False,
        "attention_kernel": "sdpa" if tf else None,  # F.scaled_dot_product_attention (perfmodel.measure.models)
        "torch_compile": None if is_gbm else False,
        "channels_last": config.channels_last if config.kind == "resnet" else None,
        "trainable_fraction": None if (is_gbm or config.lora_r) else 1.0,
        "includes_optimizer_step": None if is_gbm else True,
        "num_gpus": 1,
        "num_nodes": 1,
        "strategy": "ddp",
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "context_parallel": 1,
        "cpu_offload": None if is_gbm else False,
        "framework": "lightgbm" if is_gbm else "torch-eager",
    }


# --- sizes (exact parameter counts of the slice models; OOM prediction via perfmodel.analytic) --


def transformer_params(config: SliceConfig) -> int:
    """Parameters of the llama/bert slice models in perfmodel.measure.models, counted analytically
    (a test checks this equals sum(p.numel()) of the built model)."""
    d = config.hidden_size or 0
    L = config.num_layers or 0
    h = config.num_heads or 1
    kv = config.num_kv_heads or h
    f = config.ffn_hidden_size or 4 * d
    V = config.vocab_size or 0
    hd = d // h
    if config.kind == "llama":
        per_layer = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * f + 2 * d
        return V * d + L * per_layer + d + d * V
    if config.kind == "bert":
        per_layer = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
        positions = max(config.seq_len or 0, 512)
        embeddings = V * d + positions * d + 2 * d
        head = d * d + d + d * (config.num_classes or 2) + (config.num_classes or 2)
        return embeddings + L * per_layer + head
    raise ValueError(f"transformer_params: {config.kind} is not a transformer")


def lora_params(config: SliceConfig) -> int:
    """Adapter parameters: rank r on q and v of every layer (A: r x d, B: out x r)."""
    if not config.lora_r or not config.is_transformer:
        return 0
    d = config.hidden_size or 0
    h = config.num_heads or 1
    kv = config.num_kv_heads or h
    hd = d // h
    r = config.lora_r
    return (config.num_layers or 0) * (r * d + h * hd * r + r * d + kv * hd * r)


def analytic_memory(config: SliceConfig) -> MemoryBreakdown:
    """perfmodel's analytic memory model (perfmodel.analytic.memory) applied to a transformer
    slice (its row_fields, read by perfmodel.codec), on a single accelerator with no
    framework-specific buffers."""
    # Only the vendor matters to the memory model; the peaks just let every precision validate.
    device = GPUSpec(name="device", peak_tflops=dict.fromkeys(("fp32", "tf32", "bf16", "fp16", "fp8"), 1.0))
    return estimate_memory(workload_from_row({**row_fields(config), "gpu": device.name}, gpu=device))


def estimate_static_memory_gb(config: SliceConfig) -> float:
    """Weights + gradients + optimizer state in GB (perfmodel's analytic memory model)."""
    if not config.is_transformer:
        return 0.0
    mem = analytic_memory(config)
    return mem.weights_gb + mem.gradients_gb + mem.optimizer_gb


def predicted_oom(config: SliceConfig, memory_gb: float, margin: float = 1.25) -> str | None:
    """A reason string when the configuration obviously cannot fit in `memory_gb` (perfmodel's
    analytic peak-memory estimate exceeds it by `margin`), else None."""
    if not config.is_transformer or memory_gb <= 0:
        return None
    mem = analytic_memory(config)
    static = mem.weights_gb + mem.gradients_gb + mem.optimizer_gb
    if mem.total_gb > margin * memory_gb:
        return (
            f"not run: predicted out of memory (analytic peak {mem.total_gb:.1f} GB, of which "
            f"weights+grads+optimizer {static:.1f} GB, > {margin:g} x {memory_gb:.1f} GB device memory)"
        )
    return None
