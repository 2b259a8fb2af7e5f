"""The resolved description of a training job: model, training settings, hardware, parallelism.

Every config format (native YAML, Ludwig YAML) resolves into a `Workload`; the analytic model,
the learned model and the feature table all read the same fields. Frozen, keyword-only
dataclasses; range checks raise `ConfigError` naming the dotted field.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import Any

from perfmodel.errors import ConfigError, quote
from perfmodel.recipes import OPTIMIZER_STATES, FrameworkRecipe

PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16", "bf16", "fp16", "fp8")
"""Training precisions. `amp_*` = fp32 master weights with autocast matmuls; bare `bf16`/`fp16` =
weights, gradients and optimizer state in half precision; `fp8` = fp8 matmuls (Transformer
Engine style) with bf16 weights and fp32 master copy."""

STRATEGIES = ("ddp", "fsdp", "zero1", "zero2", "zero3")
OPTIMIZERS = ("adamw", "adam", "sgd", "sgd_momentum", "adafactor", "lion", "lbfgs", "none")
ATTENTION_KERNELS = ("sdpa", "flash", "eager")
CHECKPOINTING_POLICIES = ("full", "selective")
ARCHS = ("decoder", "encoder", "encoder-decoder", "cnn", "mlp", "gbm", "other")
FRAMEWORKS = ("hf-eager", "torch-eager", "composer-fsdp", "megatron", "nemo", "torchtitan", "deepspeed", "dle-ngc", "lightgbm",
              "ludwig")
"""Software-stack families the learned model knows by name (any other framework is 'other').
`ludwig`: Ludwig's trainer around eager PyTorch (its start-up and per-batch work are measured terms,
perfmodel/analytic/totals.py startup_s and overhead.framework_floor_per_micro_batch_s)."""


@dataclass(frozen=True)
class FieldRange:
    """The physically plausible values of one numeric field (inclusive bounds)."""

    low: float
    """Smallest value allowed (excluded when `low_open`)."""
    high: float
    """Largest value allowed."""
    low_open: bool = False
    """True when `low` itself is not allowed (e.g. epochs > 0)."""

    def contains(self, value: float) -> bool:
        return (value > self.low if self.low_open else value >= self.low) and value <= self.high

    def describe(self) -> str:
        """'between 1 and 1,024' or '> 0 and <= 1,000,000'."""
        if self.low_open:
            return f"> {_fmt_bound(self.low)} and <= {_fmt_bound(self.high)}"
        return f"between {_fmt_bound(self.low)} and {_fmt_bound(self.high)}"


def _fmt_bound(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) <= 1e9 else f"{value:g}"


FIELD_RANGES: dict[str, FieldRange] = {
    # model: the largest published transformers are ~3e4 wide, ~200 layers deep, 2.6e5-token vocabularies.
    "model.hidden_size": FieldRange(1, 1 << 20),
    "model.num_layers": FieldRange(1, 10_000),
    "model.num_heads": FieldRange(1, 1 << 16),
    "model.num_kv_heads": FieldRange(1, 1 << 16),
    "model.head_dim": FieldRange(1, 1 << 16),
    "model.ffn_hidden_size": FieldRange(1, 1 << 24),
    "model.vocab_size": FieldRange(0, 10_000_000),
    "model.num_experts": FieldRange(1, 1 << 20),
    "model.experts_per_token": FieldRange(1, 1 << 20),
    "model.learned_pos_embeddings": FieldRange(0, 1 << 27),
    "model.params_total": FieldRange(1, 1e15),
    "model.forward_gflops_per_sample": FieldRange(0, 1e9, low_open=True),
    "model.activation_mb_per_sample": FieldRange(0, 1e7),
    "model.gemm_layers": FieldRange(1, 100_000),
    "model.attention_layers": FieldRange(0, 100_000),
    "model.attention_gflops_per_sample": FieldRange(0, 1e7),
    "model.attention_mscores_per_sample": FieldRange(0, 1e9),
    "model.depthwise_layers": FieldRange(0, 100_000),
    "model.depthwise_gflops_per_sample": FieldRange(0, 1e7),
    "model.depthwise_melements_per_sample": FieldRange(0, 1e9),
    "model.grouped_layers": FieldRange(0, 100_000),
    "model.grouped_gflops_per_sample": FieldRange(0, 1e7),
    "model.grouped_melements_per_sample": FieldRange(0, 1e9),
    "model.embedding_params": FieldRange(0, 1e13),
    "model.embedding_lookups_per_sample": FieldRange(0, 1_000_000),
    "model.embedding_dim": FieldRange(0, 1 << 20),
    "model.part_layers": FieldRange(0, 10_000),
    "model.part_tokens": FieldRange(0, 1 << 27),
    "model.part_hidden_size": FieldRange(0, 1 << 20),
    "model.part_num_heads": FieldRange(0, 1 << 16),
    "model.part_ffn_size": FieldRange(0, 1 << 24),
    "model.part_inputs": FieldRange(0, 1_000_000),
    "model.part_input_width": FieldRange(0, 1e9),
    "model.part_vocab_size": FieldRange(0, 10_000_000),
    # training
    "training.seq_len": FieldRange(1, 1 << 27),
    "training.micro_batch_size": FieldRange(1, 1_000_000_000),  # recommenders: 16 M (user, item) pairs per GPU
    "training.grad_accum_steps": FieldRange(1, 1_000_000),
    "training.lora_r": FieldRange(1, 1 << 16),
    "training.lora_target_modules": FieldRange(1, 1_000),
    "training.trainable_fraction": FieldRange(0, 1),
    "training.lora_dropout": FieldRange(0, 1),
    "model.dropout": FieldRange(0, 1),
    "training.tokens": FieldRange(1, 1e17),
    "training.samples": FieldRange(1, 1e15),
    "training.epochs": FieldRange(0, 1_000_000, low_open=True),
    "training.steps": FieldRange(0, 1e12),
    "training.eval_fraction": FieldRange(0, 100),
    "training.gbm_rows": FieldRange(1, 1e12),
    "training.gbm_features": FieldRange(1, 10_000_000),
    "training.gbm_rounds": FieldRange(1, 100_000_000),
    # hardware: the largest training clusters hold ~2e5 accelerators.
    "hardware.num_gpus": FieldRange(1, 1_000_000),
    "hardware.num_nodes": FieldRange(1, 1_000_000),
    "hardware.tensor_parallel": FieldRange(1, 1_000_000),
    "hardware.pipeline_parallel": FieldRange(1, 1_000_000),
    "hardware.context_parallel": FieldRange(1, 1_000_000),
    "hardware.price_per_gpu_hour": FieldRange(0, 10_000),
}
"""Allowed range of every numeric field of ModelSpec, TrainingSpec and ParallelSpec, by dotted
config path. Generous on purpose (orders of magnitude beyond anything trained today): they exist
to refuse typos and overflows (1e300, 1e9 GPUs), not to judge a design."""

FIELD_CHOICES: dict[str, tuple[Any, ...]] = {
    "model.arch": ARCHS,
    "training.precision": PRECISIONS,
    "training.optimizer": OPTIMIZERS,
    "training.attention_kernel": ATTENTION_KERNELS,
    "training.quantization_bits": (4, 8),
    "training.checkpointing_policy": CHECKPOINTING_POLICIES,
    "training.optimizer_state": OPTIMIZER_STATES,
    "hardware.strategy": STRATEGIES,
}
"""Allowed values of every enumerated field, by dotted config path."""


def choice_problem(path: str, value: Any, allowed: tuple[Any, ...]) -> str | None:
    """Why `value` is not one of `allowed` (with close matches), or None."""
    if value in allowed:
        return None
    close = difflib.get_close_matches(str(value).lower(), [str(a) for a in allowed], n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{path} must be one of {', '.join(str(a) for a in allowed)}; got {quote(value)}{hint}"


def field_problem(path: str, value: Any) -> str | None:
    """Why `value` is not allowed at the dotted config `path` (not a finite number, outside
    FIELD_RANGES, or not one of FIELD_CHOICES), or None when it is allowed or the path has no rule."""
    if value is None:
        return None
    if path in FIELD_CHOICES:
        return choice_problem(path, value, FIELD_CHOICES[path])
    rng = FIELD_RANGES.get(path)
    if rng is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{path} must be a number, got {quote(value)}"
    if isinstance(value, float) and not math.isfinite(value):  # ints are always finite (and exact)
        return f"{path} must be a finite number, got {value!r}"
    if not rng.contains(value):
        return f"{path} must be {rng.describe()}, got {_fmt_value(value)}"
    return None


def _fmt_value(value: float) -> str:
    if isinstance(value, int) and abs(value) >= 1e15:
        return f"{float(value):.3g}" if abs(value) < 1e308 else quote(value, 24)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _check_range(path: str, value: Any) -> None:
    problem = field_problem(path, value)
    if problem:
        raise ConfigError(problem)


def _check_positive(path: str, value: float | int | None, *, allow_zero: bool = False) -> None:
    """A finite number > 0 (>= 0 with allow_zero), inside FIELD_RANGES[path] when it has one."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path} must be a number, got {quote(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{path} must be a finite number, got {value!r}")
    if path in FIELD_RANGES:
        _check_range(path, value)
    elif value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{path} must be {bound}, got {value!r}")


def _check_fields(spec: Any, section: str) -> None:
    """Every field of a spec against FIELD_RANGES / FIELD_CHOICES (the first problem raises)."""
    for name, path in _ruled_fields(spec.__class__, section):
        _check_range(path, getattr(spec, name))


@functools.cache
def _ruled_fields(cls: type, section: str) -> tuple[tuple[str, str], ...]:
    """(field name, dotted path) of the fields of `cls` that have a rule, in declaration order
    (workloads are re-made thousands of times in a fit search; the rest need no look)."""
    paths = ((f.name, f"{section}.{f.name}") for f in dataclasses.fields(cls))
    return tuple((name, path) for name, path in paths if path in FIELD_RANGES or path in FIELD_CHOICES)


def _check_choice(path: str, value: Any, allowed: tuple[Any, ...]) -> None:
    problem = choice_problem(path, value, allowed)
    if problem:
        raise ConfigError(problem)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Architecture of the model being trained. Transformers are given by dimensions; other
    architectures (CNNs, MLPs) by parameter count and forward FLOPs per sample."""

    name: str
    """Catalog key or Hugging Face id, for display and grouping."""
    family: str = "custom"
    """Model family used for grouped evaluation (llama, gpt2, bert, resnet, ...)."""
    arch: str = "decoder"
    """One of ARCHS."""
    hidden_size: int | None = None
    """Model width d (transformers)."""
    num_layers: int | None = None
    """Number of transformer blocks L (encoder + decoder layers for encoder-decoder)."""
    num_heads: int | None = None
    """Attention heads."""
    num_kv_heads: int | None = None
    """Key/value heads (grouped-query attention); defaults to num_heads."""
    head_dim: int | None = None
    """Width of one attention head; defaults to hidden_size / num_heads (Gemma 2 differs)."""
    ffn_hidden_size: int | None = None
    """Feed-forward inner width; defaults to 4*d (or 8/3*d rounded when gated_mlp)."""
    vocab_size: int | None = None
    """Vocabulary size (0 for non-token inputs)."""
    gated_mlp: bool = False
    """True for SwiGLU/GeGLU MLPs (three weight matrices instead of two)."""
    tied_embeddings: bool = False
    """True when the LM head shares the input embedding matrix."""
    num_experts: int = 1
    """Experts per MoE layer (1 = dense)."""
    experts_per_token: int = 1
    """Experts each token is routed to (top-k)."""
    learned_pos_embeddings: int = 0
    """Rows of a learned absolute position-embedding table (0 for rotary/ALiBi)."""
    dropout: float = 0.0
    """Dropout probability of the model's hidden and attention dropout layers in training (its
    config.json: hidden_dropout_prob, resid_pdrop, attention_dropout, ...); each dropout keeps a
    1-byte mask per element for backward."""
    params_total: int | None = None
    """Total parameters; required for non-transformer archs, optional override otherwise."""
    forward_gflops_per_sample: float | None = None
    """Forward-pass GFLOPs for one sample at reference_input (non-transformer archs)."""
    activation_mb_per_sample: float | None = None
    """Activation memory kept for backward per sample in MB at 16-bit (non-transformer archs)."""
    reference_input: str | None = None
    """The input the FLOPs figure refers to, e.g. '224x224 image'; for a torchvision ResNet (resnet18 ... resnet152) its side is the image size the layer-by-layer plan and the memory model use."""
    gemm_layers: int | None = None
    """Convolutions and matmuls with weights one forward of a non-transformer model runs (each an
    eager kernel with its own launch and tile): the CNN / MLP plan cuts forward_gflops_per_sample
    (less its attentions') into this many GEMMs. None: not known (a CNN is then cut into
    convolutions of one reference size, an MLP into square matmuls)."""
    attention_layers: int = 0
    """Attentions one forward of a non-transformer model runs (a hybrid transformer's: XCiT, Swin,
    CaiT, ...): each costed as the math path (its scores written, normalised and read, two batched
    GEMMs), with the head width attention_gflops_per_sample / (4 x attention_mscores_per_sample)."""
    attention_gflops_per_sample: float = 0.0
    """Forward GFLOPs of those attentions' batched matmuls (q k^T and p v) per sample; part of
    forward_gflops_per_sample."""
    attention_mscores_per_sample: float = 0.0
    """Scores those attentions normalise per sample (heads x queries x keys, all layers), millions."""
    depthwise_layers: int = 0
    """Depthwise convolutions (one input channel per group) among gemm_layers: each costed as a
    memory-bound stencil over its input and output, not as a GEMM (EfficientNet, MobileNet,
    ConvNeXt)."""
    depthwise_gflops_per_sample: float = 0.0
    """Forward GFLOPs of those depthwise convolutions per sample; part of forward_gflops_per_sample."""
    depthwise_melements_per_sample: float = 0.0
    """Elements those depthwise convolutions read and write per sample (inputs + outputs), millions."""
    grouped_layers: int = 0
    """Grouped convolutions with several input channels a group (ResNeXt, RegNet, NFNet) among
    gemm_layers: each costed as a batched GEMM of its groups, one group's width wide."""
    grouped_gflops_per_sample: float = 0.0
    """Forward GFLOPs of those grouped convolutions per sample; part of forward_gflops_per_sample."""
    grouped_melements_per_sample: float = 0.0
    """Elements those grouped convolutions read and write per sample (inputs + outputs), millions."""
    embedding_params: int = 0
    """Elements of the embedding tables a recommender (arch mlp) looks its inputs up in, part of
    params_total: the MLP plan runs its matmuls over the rest and costs the lookups apart."""
    embedding_lookups_per_sample: int = 0
    """Table rows one sample looks up (NCF: a user and an item row in each of its two pairs of tables: 4)."""
    embedding_dim: int = 0
    """Width of a looked-up row (the mean over the lookups)."""
    part_layers: int = 0
    """Transformer blocks inside a model that is not itself a transformer (arch mlp/other: a Ludwig
    ECD model's FT-Transformer combiner or transformer sequence encoder, Ludwig's TransformerStack in
    ludwig/modules/attention_modules.py); 0 = none. The part_* fields describe that stack so the step
    plan costs it kernel by kernel; its FLOPs are included in forward_gflops_per_sample."""
    part_tokens: int = 0
    """Tokens per sample the stack runs over (FT-Transformer: input features + [CLS]; a sequence
    encoder: the padded sequence length)."""
    part_hidden_size: int = 0
    """Width d of the stack (its q/k/v/output projections are d x d)."""
    part_num_heads: int = 0
    """Attention heads of the stack."""
    part_ffn_size: int = 0
    """Inner width of each block's feed-forward (Ludwig's transformer_output_size)."""
    part_inputs: int = 0
    """Per-sample input projections into the stack, one small linear layer each (FT-Transformer: one
    per input feature, its `projectors`); 0 = none."""
    part_input_width: float = 0.0
    """Mean input width of those projections (elements per sample: a number feature 1, a category
    embedding its size)."""
    part_vocab_size: int = 0
    """Rows of the token embedding before the stack (a sequence encoder's TokenAndPositionEmbedding,
    part_hidden_size wide); 0 = none."""
    source: str = ""
    """Where the numbers come from."""

    def __post_init__(self) -> None:
        _check_fields(self, "model")
        if self.experts_per_token > self.num_experts:
            raise ConfigError(
                f"model.experts_per_token ({self.experts_per_token}) cannot exceed "
                f"model.num_experts ({self.num_experts})"
            )
        if self.is_transformer:
            missing = [k for k in ("hidden_size", "num_layers", "num_heads") if getattr(self, k) is None]
            if missing:
                raise ConfigError(
                    f"model.{missing[0]} is required for a {self.arch} model "
                    f"(give a catalog name in model.name, or all of hidden_size, num_layers, num_heads)"
                )
            if self.head_dim is None and self.hidden_size % self.num_heads:  # type: ignore[operator]
                raise ConfigError(
                    f"model.hidden_size ({self.hidden_size}) must be divisible by "
                    f"model.num_heads ({self.num_heads})"
                )
        elif self.arch != "gbm" and (self.params_total is None or self.forward_gflops_per_sample is None):
            raise ConfigError(
                f"model.params_total and model.forward_gflops_per_sample are required for a "
                f"{self.arch} model"
            )
        if self.part_layers:
            if self.is_transformer or self.arch == "gbm":
                raise ConfigError(
                    f"model.part_layers describes a transformer part inside an mlp/cnn/other model; a "
                    f"{self.arch} model is given by hidden_size/num_layers/num_heads instead"
                )
            for key in ("part_tokens", "part_hidden_size", "part_num_heads", "part_ffn_size"):
                if getattr(self, key) < 1:
                    raise ConfigError(f"model.{key} must be >= 1 when model.part_layers is given")
            if self.part_hidden_size % self.part_num_heads:
                raise ConfigError(
                    f"model.part_hidden_size ({self.part_hidden_size}) must be divisible by "
                    f"model.part_num_heads ({self.part_num_heads})"
                )

    @property
    def is_transformer(self) -> bool:
        return self.arch in ("decoder", "encoder", "encoder-decoder")

    @property
    def head_width(self) -> float:
        """Width of one attention head."""
        return float(self.head_dim or (self.hidden_size or 0) / (self.num_heads or 1))

    @property
    def attention_width(self) -> float:
        """num_heads x head width: the q projection's output (= hidden_size for most models)."""
        return self.head_width * (self.num_heads or 1)

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads or 1

    @property
    def ffn_size(self) -> int:
        if self.ffn_hidden_size:
            return self.ffn_hidden_size
        d = self.hidden_size or 0
        return int(8 * d / 3) if self.gated_mlp else 4 * d


@dataclass(frozen=True, kw_only=True)
class TrainingSpec:
    """How the model is trained: shapes, precision, optimizer, amount of data."""

    seq_len: int = 512
    """Tokens per sample (transformers); ignored for other archs."""
    micro_batch_size: int = 8
    """Samples per GPU per forward/backward pass."""
    grad_accum_steps: int = 1
    """Micro-batches accumulated per optimizer step."""
    precision: str = "bf16"
    """One of PRECISIONS."""
    optimizer: str = "adamw"
    """One of OPTIMIZERS."""
    activation_checkpointing: bool = False
    """Full activation recomputation in backward (adds one forward pass)."""
    checkpointing_policy: str = "full"
    """What activation checkpointing keeps of each layer (one of CHECKPOINTING_POLICIES): `full`,
    its input (the layer is recomputed in backward); `selective`, also the outputs of every other
    matmul and of attention (torchtitan's per-op policy). Ignored without activation_checkpointing."""
    lora_r: int | None = None
    """LoRA rank; None = full fine-tuning."""
    lora_target_modules: int = 2
    """Weight matrices per layer that carry LoRA adapters (2 = q,v as in PEFT's default; a config that
    leaves it out gets its framework recipe's `lora_targets`: hf-eager, liger and unsloth 7, every linear)."""
    lora_dropout: float = 0.0
    """Dropout probability on each adapter's input (PEFT lora_dropout; its default 0)."""
    quantization_bits: int | None = None
    """Bits of the frozen base weights (4 or 8, QLoRA); None = unquantized."""
    optimizer_state: str | None = None
    """How optimizer states are stored (fp32, 8bit, paged-8bit, paged-fp32: bitsandbytes); None: the
    framework recipe's default (unsloth: 8bit)."""
    optimizer_in_backward: bool | None = None
    """The optimizer step runs inside backward, one parameter at a time, so the gradients of the
    whole model are never held at once (torchtune optimizer_in_bwd); None: the recipe's default."""
    gradient_clipping: bool | None = None
    """The gradients are clipped to a global norm before each optimizer step (Hugging Face
    max_grad_norm, Ludwig gradient_clipping, Megatron clip_grad); None: the recipe's default."""
    fused_cross_entropy: bool = False
    """Fused/chunked linear cross-entropy (Liger-Kernel, torchtune chunked loss): the full
    (tokens x vocab) logits are never materialised."""
    attention_kernel: str = "sdpa"
    """Attention implementation: one of ATTENTION_KERNELS. 'sdpa' (PyTorch scaled_dot_product_attention,
    Hugging Face's default) and 'flash' (FlashAttention 2/3) never materialise the s x s scores;
    'eager' (the math path) writes and reads them in forward and backward."""
    torch_compile: bool = False
    """Model wrapped in torch.compile: elementwise work fused into fewer kernels (less memory
    traffic, fewer launches)."""
    channels_last: bool = False
    """Model and images in torch.channels_last (NHWC) memory format. Off (PyTorch's default,
    NCHW), a 16-bit convolution on an accelerator runs cuDNN's tensor-core kernels, which work in
    NHWC, behind a transposition of its input and output each way."""
    trainable_fraction: float | None = None
    """Fraction of parameters that get gradients when not LoRA (e.g. 0 for a frozen encoder)."""
    tokens: float | None = None
    """Total training tokens (all epochs)."""
    samples: float | None = None
    """Training samples per epoch."""
    epochs: float | None = None
    """Passes over `samples`."""
    steps: int | None = None
    """Optimizer steps, when given directly (overrides tokens/samples)."""
    eval_fraction: float = 0.0
    """Extra time spent on evaluation, as a fraction of training compute."""
    gbm_rows: int | None = None
    """Training rows (gradient-boosted trees)."""
    gbm_features: int | None = None
    """Input features (gradient-boosted trees)."""
    gbm_rounds: int | None = None
    """Boosting rounds (gradient-boosted trees)."""

    def __post_init__(self) -> None:
        _check_fields(self, "training")
    @property
    def is_half(self) -> bool:
        return self.precision in ("bf16", "fp16")

    @property
    def compute_dtype(self) -> str:
        """The dtype the matmuls run in: fp32, tf32, bf16, fp16 or fp8."""
        return {"amp_bf16": "bf16", "amp_fp16": "fp16"}.get(self.precision, self.precision)


@dataclass(frozen=True, kw_only=True)
class ParallelSpec:
    """How the job is spread over accelerators."""

    num_gpus: int = 1
    """Accelerators in total (all nodes)."""
    num_nodes: int = 1
    """Machines; GPUs are split evenly over them."""
    strategy: str = "ddp"
    """Data-parallel strategy: one of STRATEGIES (fsdp = full sharding, like zero3)."""
    tensor_parallel: int = 1
    """Tensor-parallel degree."""
    pipeline_parallel: int = 1
    """Pipeline-parallel degree."""
    context_parallel: int = 1
    """Context-parallel degree: each sequence is split over this many GPUs (ring attention passes
    keys and values around them). Weights are replicated over them; gradients are reduced, and
    ZeRO/FSDP state sharded, over data_parallel x context_parallel (Megatron's DP-CP group,
    torchtitan's dp_shard_cp mesh)."""
    cpu_offload: bool = False
    """Optimizer state (and for zero3 parameters) offloaded to host memory."""
    price_per_gpu_hour: float | None = None
    """On-demand price of one accelerator for one hour, in USD; None: the default price of
    perfmodel/catalog/prices.yaml (`perfmodel.catalog.prices`)."""

    def __post_init__(self) -> None:
        _check_fields(self, "hardware")
        _check_positive("hardware.price_per_gpu_hour", self.price_per_gpu_hour, allow_zero=True)
        if self.num_gpus % self.num_nodes:
            raise ConfigError(
                f"hardware.num_gpus ({self.num_gpus}) must be a multiple of hardware.num_nodes ({self.num_nodes})"
            )
        if self.num_gpus % (self.model_split * self.context_parallel):
            cp = f" x context_parallel ({self.context_parallel})" if self.context_parallel > 1 else ""
            raise ConfigError(
                f"hardware.num_gpus ({self.num_gpus}) must be a multiple of tensor_parallel x "
                f"pipeline_parallel ({self.tensor_parallel} x {self.pipeline_parallel}){cp}"
            )

    @property
    def model_split(self) -> int:
        """GPUs one copy of the weights is split over: tensor x pipeline parallel."""
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def data_parallel(self) -> int:
        """Replicas that each take different samples."""
        return self.num_gpus // (self.model_split * self.context_parallel)

    @property
    def shard_group(self) -> int:
        """Ranks that hold the same weights: gradients are reduced (and ZeRO/FSDP state sharded)
        over data_parallel x context_parallel."""
        return self.data_parallel * self.context_parallel

    @property
    def activation_split(self) -> int:
        """GPUs one micro-batch's activations are split over: tensor (sequence-parallel) x context."""
        return self.tensor_parallel * self.context_parallel

    @property
    def gpus_per_node(self) -> int:
        return self.num_gpus // self.num_nodes


_FALLBACK_TO_FP32 = ("tf32", "fp16")
TENSOR_CORE_DTYPES = ("tf32", "bf16", "fp16", "fp8")
"""Dtypes that run on tensor/matrix cores where the accelerator has them."""


@dataclass(frozen=True, kw_only=True)
class GPUSpec:
    """One accelerator from the catalog (or the local CPU). Peaks are dense (no sparsity)."""

    name: str
    """Catalog key users type, e.g. 'A100-80GB'."""
    vendor: str = "nvidia"
    """nvidia | amd | intel | cpu."""
    generation: str = ""
    """Architecture generation (Volta, Ampere, Hopper, Blackwell, CDNA2, ...)."""
    memory_gb: float = 0.0
    """Device memory in GB (1e9 bytes)."""
    hbm_bandwidth_gb_per_s: float = 0.0
    """Peak device memory bandwidth in GB/s."""
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Dense peak TFLOP/s by compute dtype (fp32, tf32, bf16, fp16, fp8, int8)."""
    intra_node_bandwidth_gb_per_s: float = 0.0
    """Per-GPU unidirectional bandwidth to peers in the same node (NVLink/xGMI/PCIe) in GB/s."""
    inter_node_bandwidth_gb_per_s: float = 25.0
    """Per-GPU network bandwidth between nodes in GB/s (default 200 Gb/s InfiniBand)."""
    gpus_per_server: int = 8
    """GPUs in one server (4 on a GB200/GB300 NVL72 compute tray): how a GPU count maps to nodes."""
    scale_up_domain_gpus: int = 0
    """GPUs joined by the intra-node fabric beyond one node (72 in a GB200/GB300 NVL72 rack);
    0: the node is the domain."""
    tdp_w: float = 0.0
    """Board power in W."""
    sm_count: int = 0
    """Streaming multiprocessors (compute units on AMD)."""
    l2_cache_mb: float = 0.0
    """On-chip L2 cache in MB (Gaudi: its on-chip SRAM); 0 = unknown (CPUs). The kernel-table
    model reads it: a memory-bound call small enough to stay in L2 streams faster (perfmodel/kernels/efficiency.py)."""
    release_year: int = 0
    """Year of release."""
    aliases: tuple[str, ...] = ()
    """Other spellings that resolve to this entry (lower-case)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Field name -> where the number comes from."""
    measured: dict[str, float] = field(default_factory=dict)
    """Measured ceilings from the collectors (e.g. 'matmul_bf16_tflops', 'hbm_copy_gb_per_s')."""

    def servers_for(self, num_gpus: int) -> int:
        """The nodes `num_gpus` of these accelerators need: the fewest servers that hold them split
        evenly, at most gpus_per_server on each (on servers of 8: 12 GPUs are 2 nodes of 6, 9 are
        3 of 3). The one rule for every GPU count whose nodes are not given."""
        per = max(self.gpus_per_server, 1)
        if num_gpus <= per:
            return 1
        on_each = next(d for d in range(per, 0, -1) if num_gpus % d == 0)
        return num_gpus // on_each

    def check_nodes(self, num_gpus: int, num_nodes: int) -> None:
        """ConfigError, naming both keys and the fix, when `num_nodes` servers cannot hold
        `num_gpus` of these accelerators (more than gpus_per_server on one)."""
        if num_nodes >= 1 and -(-num_gpus // num_nodes) > self.gpus_per_server:
            need = self.servers_for(num_gpus)
            raise ConfigError(
                f"hardware.num_gpus ({num_gpus}) does not fit on hardware.num_nodes ({num_nodes}): one {self.name} "
                f"server holds {self.gpus_per_server}, so {num_gpus} GPUs need {need} nodes; set "
                f"hardware.num_nodes to {need} (--set hardware.num_nodes={need}) or leave it out to derive it"
            )

    def peak_for(self, compute_dtype: str) -> float:
        """Dense peak TFLOP/s for a compute dtype; raises ConfigError if unsupported.

        tf32 and fp16 fall back to the fp32 rate on hardware without tensor cores for them
        (PyTorch runs them, just without acceleration); bf16 and fp8 do not fall back."""
        value = self.peak_tflops.get(compute_dtype)
        if not value and compute_dtype in _FALLBACK_TO_FP32:
            value = self.peak_tflops.get("fp32")
        if not value:
            supported = ", ".join(k for k, v in self.peak_tflops.items() if v) or "none"
            raise ConfigError(
                f"{self.name} has no {compute_dtype} support (supported: {supported}); "
                f"choose another training.precision"
            )
        return float(value)

    def supports(self, compute_dtype: str) -> bool:
        try:
            self.peak_for(compute_dtype)
        except ConfigError:
            return False
        return True

    def tensor_cores(self, compute_dtype: str) -> bool:
        """True where `compute_dtype` runs on tensor/matrix cores: a peak well (1.5x) above the fp32 one."""
        fp32 = self.peak_tflops.get("fp32") or 0.0
        return (
            compute_dtype in TENSOR_CORE_DTYPES
            and self.supports(compute_dtype)
            and self.peak_for(compute_dtype) > 1.5 * fp32
        )


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Everything needed to predict one training job."""

    model: ModelSpec
    training: TrainingSpec
    gpu: GPUSpec
    parallel: ParallelSpec
    framework: str = "hf-eager"
    """The training stack: a recipe key or alias of perfmodel/catalog/frameworks/ (hf-eager,
    torch-eager, liger, torchtune, megatron, ...), or any name (costed with `recipe`)."""
    recipe: FrameworkRecipe | None = None
    """A recipe the config described itself (or the `other` recipe under an unknown name); None:
    the catalog recipe of `framework` (perfmodel.catalog.frameworks.recipe_of)."""
    assumptions: tuple[str, ...] = ()
    """Defaults perfmodel applied because the config was silent (shown to the user)."""

    def __post_init__(self) -> None:
        # Validates the precision against the GPU here, where both are known.
        if self.model.arch not in ("gbm",):
            self.gpu.peak_for(self.training.compute_dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of every field (for --json output and MLflow params)."""
        return dataclasses.asdict(self)
