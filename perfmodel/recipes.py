"""Frameworks as kernel recipes (DESIGN.md, "Modeling approach"): what a training stack runs for one
step, described by its parts instead of its name, so that a framework with no training rows is
still costed from what it does.

A recipe says which kernel kinds run as one hand-written fused kernel (Liger, unsloth, Transformer
Engine, apex) and which run op by op (eager PyTorch), whether torch.compile fuses the rest, the
attention kernel, the optimizer implementation and its state format, how the loss over the
vocabulary is computed, and the framework's own host work per step. The analytic step model, the
memory model and the learned residual's features all read the recipe, never the framework's name.

The recipes are data: one YAML file per framework under `perfmodel/catalog/frameworks/`, each
field with its source (`perfmodel.catalog.frameworks` loads them). This module only defines the
record and its checks (it sits at the workload layer: the Workload may carry a custom recipe).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from perfmodel.errors import ConfigError, quote

FUSABLE_KINDS = ("norm", "activation", "rotary", "elementwise", "loss", "embedding")
"""Kernel kinds a recipe may run as one fused kernel (names of `perfmodel.kernels.work.KERNEL_KINDS`):
normalisation, activation/gating, rotary embedding, residual and other elementwise work, the loss
over the vocabulary (a fused linear cross-entropy: the logits are never materialised), the
embedding backward."""

ATTENTION_DEFAULTS = ("sdpa", "flash", "eager")
"""Attention kernels a recipe may default to (perfmodel.workload.ATTENTION_KERNELS)."""

OPTIMIZER_IMPLS = ("for-loop", "foreach", "fused")
"""torch.optim implementations (PyTorch docs, torch.optim "Algorithms": for-loop, foreach
(multi-tensor), fused (one kernel for all parameters)); apex / DeepSpeed FusedAdam is 'fused'."""

OPTIMIZER_STATES = ("fp32", "8bit", "paged-8bit", "paged-fp32")
"""How optimizer states are stored: fp32 (torch.optim; the parameters' dtype when they are 16-bit),
8-bit block-wise (bitsandbytes Adam8bit), 8-bit or 32-bit in CUDA managed memory that pages to the
host under pressure (bitsandbytes PagedAdamW8bit, PagedAdamW: outside PyTorch's allocator)."""

GQA_MODES = ("native", "repeat")
"""How grouped-query attention meets the attention kernel: `native` (SDPA enable_gqa / FlashAttention
read each K/V head for its group; transformers sdpa_attention_forward when there is no padding
mask), `repeat` (K and V repeated to every query head first, repeat_interleave / repeat_kv: the
copies are saved for backward)."""

LORA_DTYPES = ("fp32", "model")
"""The dtype of LoRA adapters: `fp32` (PEFT upcasts 16-bit adapters, autocast_adapter_dtype=True, and
casts each adapter's input to it), `model` (adapters in the model's dtype, no cast)."""

SOFTMAX_MODES = ("fp32", "native")
"""How an eager ('math') attention's softmax runs when the model itself is 16-bit (no autocast):
`fp32` (Hugging Face eager_attention_forward: softmax(dtype=torch.float32), then a cast back), `native`
(F.softmax on the 16-bit scores: DeepLearningExamples' BERT and Transformer-XL under apex amp O2).
Under autocast (amp_*) softmax runs in fp32 either way; in fp32 the two are the same."""

LOSS_MODES = ("materialized", "chunked", "fused-linear")
"""How the loss over the vocabulary runs: `materialized` (the full tokens x vocab logits, upcast
to fp32, then cross-entropy: Hugging Face ForCausalLMLoss), `chunked` (logits and loss computed
in chunks: torchtune CEWithChunkedOutputLoss, litgpt chunked_cross_entropy; the same work in more
kernels, less memory at once), `fused-linear` (LM head and loss in one kernel that never writes the
logits: Liger fused_linear_cross_entropy, unsloth)."""


@dataclass(frozen=True, kw_only=True)
class FrameworkRecipe:
    """One training stack as the kernels it runs (all fields are defaults a config can override
    where it has a key for them: training.attention_kernel, training.torch_compile,
    training.fused_cross_entropy)."""

    name: str
    """The key users type (`framework: NAME`)."""
    title: str = ""
    """One line saying what the stack is."""
    aliases: tuple[str, ...] = ()
    """Other spellings that resolve to this recipe (lower case)."""
    family: str = "other"
    """The learned model's category for this stack (perfmodel.workload.FRAMEWORKS, or 'other'): the
    only place a name survives, for rows whose stack the recipe does not describe fully."""
    fused: tuple[str, ...] = ()
    """Kernel kinds run as one hand-written fused kernel (subset of FUSABLE_KINDS)."""
    compile: bool = False
    """torch.compile (Inductor) on by default: the elementwise work between matmuls is fused."""
    attention: str = "sdpa"
    """Default attention kernel (one of ATTENTION_DEFAULTS)."""
    optimizer_impl: str = "foreach"
    """Optimizer implementation on a GPU (one of OPTIMIZER_IMPLS); a CPU runs the for-loop one."""
    optimizer_state: str = "fp32"
    """How optimizer states are stored (one of OPTIMIZER_STATES)."""
    optimizer_in_backward: bool = False
    """The optimizer step runs inside backward, parameter by parameter, so gradients of the whole
    model are never held at once (torchtune optimizer_in_bwd, LOMO)."""
    loss: str = "materialized"
    """How the loss over the vocabulary runs (one of LOSS_MODES)."""
    native_norm: bool = False
    """RMSNorm is torch.nn.RMSNorm, which runs as one ATen kernel per phase on CUDA (`_fused_rms_norm`),
    not written op by op as Hugging Face's LlamaRMSNorm is."""
    lora_fused: bool = False
    """LoRA adapters run in fused custom autograd functions (unsloth fast_lora), not as separate
    dropout / matmul / scale / add ops."""
    gqa: str = "native"
    """How grouped-query attention reaches the attention kernel (one of GQA_MODES)."""
    lora_dtype: str = "fp32"
    """The dtype LoRA adapters are kept and run in (one of LORA_DTYPES)."""
    softmax: str = "fp32"
    """An eager attention's softmax in a 16-bit model (one of SOFTMAX_MODES)."""
    full_single_device_optimizer_state: str = ""
    """How a full fine-tune on one device stores its optimizer states by default, where the stack's
    single-device full fine-tuning configs differ from its others (one of OPTIMIZER_STATES; '': as
    `optimizer_state`)."""
    full_single_device_optimizer_in_backward: bool = False
    """Whether a full fine-tune on one device runs the optimizer step inside backward by default
    (torchtune's single-device full configs: optimizer_in_bwd: True)."""
    lora_targets: int = 0
    """Weight matrices per layer a LoRA fine-tune of this stack adapts when the config does not say
    (training.lora_target_modules; 7 = every linear of a Llama block); 0: the stack names none, and
    PEFT's own default (q_proj, v_proj: 2) stands."""
    kv_cache: bool = False
    """The model fills a KV cache in its training forward (transformers models: config.use_cache is
    True by default and only gradient checkpointing turns it off): every layer's keys and values are
    copied into it and held until the forward's output is dropped, through the loss."""
    grad_clip: bool = False
    """Gradients are clipped to a global norm before each optimizer step (torch.nn.utils.clip_grad_norm_
    or the stack's own): the gradients are read twice and written once more per step."""
    grad_bucket_copies: bool = True
    """Data parallelism copies every gradient into a flat communication bucket before reducing it and
    back after (torch.nn.parallel.DistributedDataParallel with its default gradient_as_bucket_view
    False: torch/csrc/distributed/c10d/reducer.cpp copy_grad_to_bucket, a mul_out by 1 / world
    size, and finalize_bucket_dense's copy back; apex's and DeepSpeed's DDP flatten and unflatten
    the same way): two kernels per trainable tensor each optimizer step. False: the stack
    accumulates gradients into the communication buffer itself (Megatron-Core's contiguous grad
    buffer)."""
    activation_offload: bool = False
    """Checkpointed activations are offloaded to host memory (unsloth's gradient checkpointing,
    torchtune enable_activation_offloading)."""
    host_s_per_micro_batch: float = 0.0
    """The framework's own host work per micro-batch beyond launching the model's kernels (s)."""
    host_s_per_step: float = 0.0
    """The framework's own host work per optimizer step (logging, callbacks, scheduler) (s)."""
    launch_scale: float = 1.0
    """Host cost of one kernel launch relative to eager PyTorch's dispatch (CUDA graphs: ~0)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Field name -> where the value comes from."""
    notes: str = ""
    """What the recipe leaves out or assumes."""

    def __post_init__(self) -> None:
        where = f"framework recipe {self.name!r}"
        for kind in self.fused:
            if kind not in FUSABLE_KINDS:
                raise ConfigError(f"{where}: fused kind {quote(kind)} is not one of {', '.join(FUSABLE_KINDS)}")
        for attr, allowed in (
            ("attention", ATTENTION_DEFAULTS),
            ("optimizer_impl", OPTIMIZER_IMPLS),
            ("optimizer_state", OPTIMIZER_STATES),
            ("loss", LOSS_MODES),
            ("gqa", GQA_MODES),
            ("lora_dtype", LORA_DTYPES),
            ("softmax", SOFTMAX_MODES),
            ("full_single_device_optimizer_state", ("", *OPTIMIZER_STATES)),
        ):
            value = getattr(self, attr)
            if value not in allowed:
                raise ConfigError(f"{where}: {attr} must be one of {', '.join(allowed)}, got {quote(value)}")
        if isinstance(self.lora_targets, bool) or not isinstance(self.lora_targets, int) or not 0 <= self.lora_targets <= 64:
            raise ConfigError(f"{where}: lora_targets must be a whole number between 0 and 64, got {quote(self.lora_targets)}")
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise ConfigError(f"{where}: {f.name} must be true or false, got {quote(getattr(self, f.name))}")
        for attr in ("host_s_per_micro_batch", "host_s_per_step", "launch_scale"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
                raise ConfigError(f"{where}: {attr} must be a number between 0 and 10, got {quote(value)}")

    def fuses(self, kind: str) -> bool:
        """True when kernel kind `kind` runs as one fused kernel (hand-written, or by torch.compile
        for the elementwise kinds)."""
        return kind in self.fused or (self.compile and kind in ("norm", "activation", "rotary", "elementwise"))

    def describe(self) -> str:
        """One line for assumptions: name, title and the parts that matter."""
        parts = [f"attention {self.attention}", f"optimizer {self.optimizer_impl}"]
        if self.grad_clip:
            parts.append("gradient clipping")
        if self.fused:
            parts.append("fused " + "/".join(self.fused))
        if self.compile:
            parts.append("torch.compile")
        if self.loss != "materialized":
            parts.append(f"loss {self.loss}")
        if self.optimizer_state != "fp32":
            parts.append(f"{self.optimizer_state} optimizer states")
        if self.softmax != "fp32":
            parts.append(f"{self.softmax} softmax")
        return f"{self.name} ({self.title}: {', '.join(parts)})" if self.title else self.name


RECIPE_FIELDS = tuple(f for f in FrameworkRecipe.__dataclass_fields__ if f not in ("name", "sources", "notes"))
"""Fields a config's custom recipe may set (`framework: {name: ..., base: ..., <field>: ...}`)."""


def recipe_from_mapping(data: dict[str, Any], *, where: str) -> FrameworkRecipe:
    """A recipe from a mapping (a catalog file or a config's custom recipe): lists become tuples,
    unknown keys are an error naming them."""
    allowed = set(FrameworkRecipe.__dataclass_fields__)
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown recipe key {quote(unknown[0])}; allowed: {', '.join(sorted(allowed))}"
        )
    values = dict(data)
    for key in ("aliases", "fused"):
        if key in values:
            raw = values[key] or ()
            if isinstance(raw, str) or not all(isinstance(x, str) for x in raw):
                raise ConfigError(f"{where}: {key} must be a list of names, got {quote(raw)}")
            values[key] = tuple(str(x).lower() if key == "aliases" else str(x) for x in raw)
    if "sources" in values:
        values["sources"] = {str(k): str(v) for k, v in (values["sources"] or {}).items()}
    if not isinstance(values.get("name"), str) or not values["name"].strip():
        raise ConfigError(f"{where}: a recipe needs a name")
    return FrameworkRecipe(**values)
