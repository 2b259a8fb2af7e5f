"""The exact reference for peak memory, without a GPU: one real training step of the workload's
model (forward, loss, backward, optimizer step) run under `torch._subclasses.FakeTensorMode` with
PyTorch's memory tracker (`torch.distributed._tools.mem_tracker.MemTracker`), the way torchtitan's
memory estimator counts it. No tensor holds data, so a 7B model at 32k tokens per micro-batch runs
on a laptop CPU in seconds; every tensor the step creates is counted, with the CUDA caching
allocator's 512-byte rounding, as `torch.cuda.max_memory_allocated` counts it.

What is built (from the workload's dimensions, never downloaded):
  * decoders with a gated MLP: Hugging Face `LlamaForCausalLM` (RMSNorm, rotary, SwiGLU, grouped
    KV heads); without one: `GPT2LMHeadModel` (LayerNorm, learned positions, GELU); encoders:
    `BertForSequenceClassification`. The attention kernel is the workload's (`sdpa` and `flash`
    run PyTorch's SDPA, which on this CPU picks its flash kernel: it saves the output and the
    logsumexp, as FlashAttention does on a GPU; `eager` is Hugging Face's math attention).
  * LoRA as PEFT applies it (`peft/tuners/lora/layer.py` Linear.forward): the base layer frozen,
    adapters upcast to fp32 (`autocast_adapter_dtype=True`), the input cast to the adapter's dtype,
    dropout, `result + lora_B(lora_A(dropout(x))) * scaling`, cast back. Targets in the order
    q, v, k, o, gate, up, down (2 = PEFT's default q, v).
  * 4-bit base weights as bitsandbytes stores them (packed uint8 + fp32 absmax per 64 weights)
    behind bitsandbytes' `MatMul4Bit` autograd function: dequantised to the compute dtype for
    each matmul, the input kept in `ctx.tensors` for backward.
  * the recipe's loss: Hugging Face's ForCausalLMLoss (logits upcast to fp32, then cross-entropy),
    torchtune's chunked loss (8 chunks, each upcast), or a fused linear cross-entropy with
    Liger-Kernel's memory behaviour (gradients computed chunk by chunk in forward and kept); the
    recipe's fused norm / SwiGLU / rotary kernels as autograd functions that save what Liger's do.
  * the optimizer: torch.optim AdamW/Adam (the recipe's foreach or fused implementation), SGD,
    Adafactor; 8-bit states as bitsandbytes keeps them (uint8 per state + an fp32 absmax per 256,
    fp32 states for tensors under 4096 elements); paged states live in managed memory, outside the
    allocator (reported apart); the step inside backward (one optimizer per parameter, stepped in
    its post-accumulate-grad hook, as torchtune's optimizer_in_bwd).
  * checkpointing: full (every decoder layer under non-reentrant `torch.utils.checkpoint`, as
    transformers 5 does) or selective (torchtitan's per-op policy: the outputs of every other
    matmul and of attention are kept, the rest recomputed).
  * gradient accumulation: two micro-batches when there are several (the second runs with the
    first one's gradients held), then gradient clipping and the step.

What it cannot run is said by `unsupported_reason` (several GPUs, torch.compile, FP8, MoE, ...).
This module imports torch (like perfmodel.measure.models): callers import it only when they run
the oracle. transformers, an optional package, is imported where a transformers model is built.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools import mem_tracker
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import Action, MemoryProfileTimeline
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from perfmodel.analytic.activations import resnet_layout
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.measure import models
from perfmodel.measure.configs import SliceConfig
from perfmodel.workload import Workload

GB = 1e9
CUDA_ALLOCATION_BYTES = 512
"""The CUDA caching allocator rounds every block to a multiple of 512 bytes (c10/cuda/
CUDACachingAllocator.cpp kMinBlockSize); MemTracker applies it on CUDA, the oracle on its CPU too."""
LORA_TARGET_ORDER = ("q", "v", "k", "o", "gate", "up", "down")
"""Which weight matrices `training.lora_target_modules` = n adapts: the first n (2 = PEFT's q, v)."""
LORA_ALPHA = 16
"""LoRA alpha (only the scaling's value; memory does not depend on it)."""
BNB_8BIT_MIN_SIZE = 4096
"""bitsandbytes keeps 32-bit states for tensors with fewer elements (Optimizer8bit min_8bit_size)."""
BNB_8BIT_BLOCK = 256
"""Elements per absmax block of bitsandbytes' block-wise 8-bit states (blocksize 256)."""
NF4_BLOCK = 64
"""Weights per fp32 absmax of bitsandbytes' NF4 storage (blocksize 64)."""
TORCHTUNE_LOSS_CHUNKS = 8
FUSED_RMS_NORM_ON_CUDA = False
"""Whether F.rms_norm runs aten's _fused_rms_norm kernel on CUDA (keeping only the input and rstd)
instead of its composite (fp32 upcast, rsqrt, two multiplies: keeps fp32 copies). Off: PyTorch
2.13's CPU build registers _fused_rms_norm as CompositeImplicitAutograd (torch._C._dispatch_dump),
and the composite reproduces measured H200 peaks of this project's slices better (README Memory)."""
"""torchtune CEWithChunkedOutputLoss num_output_chunks."""


@dataclass(frozen=True, kw_only=True)
class OracleMemory:
    """One training step's peak memory as the allocator sees it, counted exactly."""

    peak_allocated_gb: float
    """Peak of allocated tensor memory on the device (GB, 1e9 bytes)."""
    at_peak_gb: dict[str, float]
    """What was allocated at the peak, by MemTracker's kinds: parameters, buffers, gradients,
    activations, temporary, optimizer."""
    paged_gb: float = 0.0
    """Optimizer state in managed (paged) memory, outside the allocator."""
    model: str = ""
    """What was built."""
    seconds: float = 0.0
    """Wall time of the fake step."""
    notes: tuple[str, ...] = field(default_factory=tuple)


def unsupported_reason(w: Workload) -> str | None:
    """Why the oracle cannot run `w` (None: it can)."""
    m, t = w.model, w.training
    recipe = recipe_of(w)
    if m.arch == "cnn":
        return _cnn_unsupported_reason(w)
    if m.arch not in ("decoder", "encoder"):
        return f"no model definition for a {m.arch} model (decoders, encoders and ResNets only)"
    if m.num_experts > 1:
        return "mixture-of-experts layers are not built"
    common = _device_and_stack_reason(w)
    if common:
        return common
    if recipe.activation_offload and t.activation_checkpointing:
        return "activation offloading is analytic only"
    if recipe.lora_fused:
        return "unsloth's fused LoRA kernels are not emulated"
    if t.quantization_bits not in (None, 4):
        return "only 4-bit (NF4) base weights are faked"
    if t.trainable_fraction not in (None, 0.0, 1.0):
        return "a partly trainable model (training.trainable_fraction) is not built"
    if t.optimizer not in ("adamw", "adam", "sgd", "sgd_momentum", "adafactor", "none"):
        return f"optimizer {t.optimizer} is not built"
    if m.arch == "decoder" and not m.gated_mlp and t.lora_r:
        return "LoRA on GPT-2's fused c_attn is not built"
    if _source(w) == "torch" and (t.lora_dropout or m.dropout):
        return "this project's plain-PyTorch models have no dropout"
    if m.arch == "encoder" and recipe.fused:
        return "fused kernels are emulated for decoders only"
    return None


def _device_and_stack_reason(w: Workload) -> str | None:
    """What no model definition of the oracle runs: several devices, offload, FP8, compile."""
    t, par = w.training, w.parallel
    if par.num_gpus > 1:
        return "the oracle runs one device (sharding and parallelism are analytic only)"
    if par.cpu_offload:
        return "CPU offload is analytic only"
    if t.precision == "fp8":
        return "FP8 matmuls cannot be faked"
    if t.torch_compile or recipe_of(w).compile:
        return "torch.compile's partitioner is not replayed (the oracle runs eager)"
    return None


def _cnn_unsupported_reason(w: Workload) -> str | None:
    t = w.training
    if resnet_layout(w) is None:
        return (
            "no model definition for this CNN (ResNet-18/34/50/101/152 with torchvision's parameter count "
            "and a square model.reference_input only)"
        )
    common = _device_and_stack_reason(w)
    if common:
        return common
    if t.lora_r or t.quantization_bits:
        return "LoRA and quantized base weights are built for transformers only"
    if t.trainable_fraction not in (None, 0.0, 1.0):
        return "a partly trainable model (training.trainable_fraction) is not built"
    if t.activation_checkpointing and t.checkpointing_policy != "full":
        return "selective checkpointing is built for transformers only"
    if t.optimizer not in ("adamw", "adam", "sgd", "sgd_momentum", "adafactor", "none"):
        return f"optimizer {t.optimizer} is not built"
    if (t.optimizer_state or recipe_of(w).optimizer_state) != "fp32":
        return "8-bit and paged optimizer states are built for transformers only"
    return None


def oracle_memory(w: Workload) -> OracleMemory:
    """Run one training step of `w` under FakeTensorMode with MemTracker; raises ValueError when
    `unsupported_reason(w)` says it cannot."""
    reason = unsupported_reason(w)
    if reason:
        raise ValueError(f"the memory oracle cannot run this workload: {reason}")

    started = time.perf_counter()
    with warnings.catch_warnings(), _cuda_rounding(mem_tracker), FakeTensorMode(allow_non_fake_inputs=True):
        # ModTracker warns "Module is None" for modules that run only in backward (recomputation)
        warnings.filterwarnings("ignore", message="Module is None", category=UserWarning)
        built = _build(w)
        step = _Step(w, built)
        step.prepare()
        tracker = _tracker_class(mem_tracker)()
        tracker.track_external(built.model, *step.optimizers, *step.inputs)
        with tracker:
            step.run(tracker)
        peak = tracker.get_tracker_snapshot("peak")
    device = next((d for d in peak if d.type == "cpu"), None)
    snap = peak[device] if device is not None else {}
    kinds = {str(getattr(k, "value", k)): v / GB for k, v in snap.items() if str(k) != "Total"}
    total = float(snap.get("Total", 0)) / GB
    names = {"Parameter": "parameters", "Buffer": "buffers", "Gradient": "gradients", "Activation": "activations",
             "Temp": "temporary", "Optstate": "optimizer", "Other": "other"}  # fmt: skip
    return OracleMemory(
        peak_allocated_gb=total,
        at_peak_gb={names.get(k, k): v for k, v in kinds.items()},
        paged_gb=step.paged_bytes / GB,
        model=built.description,
        seconds=time.perf_counter() - started,
        notes=tuple(built.notes),
    )


def measured_cpu_peak_gb(w: Workload) -> float:
    """The same step run for real on this CPU, its peak of allocated tensor memory read from
    PyTorch's profiler (every allocation and free the CPU allocator reports: an independent count
    of what the oracle counts, for small models). Raises ValueError like `oracle_memory`."""
    reason = unsupported_reason(w)
    if reason:
        raise ValueError(f"the memory oracle cannot run this workload: {reason}")

    torch.manual_seed(0)
    built = _build(w)
    step = _Step(w, built)
    step.prepare()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step.run(None)
    timeline = MemoryProfileTimeline(prof._memory_profile()).timeline
    current = peak = 0
    for _, action, _, size in timeline:
        if action in (Action.PREEXISTING, Action.CREATE):
            current += size
        elif action == Action.DESTROY:
            current -= size
        peak = max(peak, current)
    return peak / GB


def _tracker_class(mem_tracker: Any) -> type:
    """MemTracker that also works with frozen parameters (it registers a gradient hook on every
    parameter of a module it enters, which PyTorch refuses for one without gradients)."""

    class Tracker(mem_tracker.MemTracker):  # type: ignore[misc]
        def _track_module_params_and_buffers(self, module: Any, install_grad_hooks: bool = True) -> tuple[int, int]:
            sizes = super()._track_module_params_and_buffers(module, install_grad_hooks=False)
            if install_grad_hooks:
                for param in module.parameters():
                    if param.requires_grad and self._param_to_grad_hook_handles.get(param, None) is None:
                        def track(grad: Any) -> None:
                            self._update_and_maybe_create_winfos(grad, mem_tracker._MemRefType.GRAD)

                        self._param_to_grad_hook_handles[param] = (
                            param.register_hook(track),
                            param.register_post_accumulate_grad_hook(lambda p: track(p.grad)),
                        )
            return sizes

        def _update_peak_stats(self, peak_state: Any) -> None:
            # the device peak only: MemTracker also updates every active module's own peak after
            # every op, which costs O(modules) per op and is not needed here
            for dev, snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < snap[mem_tracker._TOTAL_KEY]:
                    self._peak_mem[dev] = snap[mem_tracker._TOTAL_KEY]
                    self._peak_mem_snap[dev] = dict(snap)

    return Tracker


@contextlib.contextmanager
def _cuda_rounding(mem_tracker: Any) -> Iterator[None]:
    """Count every storage as the CUDA caching allocator would (rounded up to 512 bytes)."""
    info = mem_tracker._WeakRefInfo
    original = info._calculate_mem_consumed

    def rounded(self: Any) -> int:
        return math.ceil(self.size * self.element_size / CUDA_ALLOCATION_BYTES) * CUDA_ALLOCATION_BYTES

    info._calculate_mem_consumed = rounded
    try:
        yield
    finally:
        info._calculate_mem_consumed = original


@dataclass
class _Built:
    model: Any
    body: Any
    """The model without its head (for the chunked and fused losses)."""
    head: Any
    """The LM head (decoders) or None."""
    layers: list[Any]
    description: str
    notes: list[str]


def _dtypes(w: Workload) -> tuple[Any, Any]:
    """(parameter dtype, autocast dtype or None)."""

    p = w.training.precision
    weights = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p, torch.float32)
    cast = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(p)
    return weights, cast


def _source(w: Workload) -> str:
    """Whose modules the step runs: this project's plain-PyTorch models (perfmodel.measure.models: the
    torch-eager recipe's torch.nn.RMSNorm, repeated K/V heads, adapters in the model's dtype) or
    Hugging Face transformers' (every other recipe)."""
    recipe = recipe_of(w)
    torch_like = recipe.native_norm and recipe.gqa == "repeat" and recipe.lora_dtype == "model"
    plain = w.model.arch == "encoder" or (w.model.arch == "decoder" and w.model.gated_mlp)
    return "torch" if torch_like and plain and recipe.loss == "materialized" and not recipe.fused else "hf"


def _build(w: Workload) -> _Built:
    if w.model.arch == "cnn":
        return _build_resnet(w)
    return _build_torch(w) if _source(w) == "torch" else _build_hf(w)


def _build_resnet(w: Workload) -> _Built:
    """perfmodel.measure.models.ResNet, which has torchvision's layers (torchvision/models/resnet.py,
    checked layer by layer): the 7x7/2 stem convolution without bias, BatchNorm2d, ReLU(inplace=True),
    MaxPool2d(3, 2, 1); basic blocks (3x3 conv with the stage's stride, BN, ReLU, 3x3 conv, BN) or
    v1.5 bottlenecks (1x1, BN, ReLU, 3x3 with the stride, BN, ReLU, 1x1 to 4x the width, BN); a 1x1
    conv + BN shortcut where the stride or the channels change; stages 64-128-256-512 wide; global
    average pooling and one Linear; every BatchNorm2d with torch's defaults (affine, running
    statistics). Two differences, neither in what autograd keeps: its blocks call F.relu out of
    place and add the shortcut out of place (torchvision: nn.ReLU(inplace=True), `out += identity`):
    relu keeps its result either way and BatchNorm its input, so the saved tensors are the same;
    only a block's transient peak holds one more activation-sized tensor (the BN output beside the
    ReLU output). The input images are in the parameters' dtype, as the slices feed them."""
    layout = resnet_layout(w)
    if layout is None:  # unsupported_reason said so first
        raise ValueError("not a ResNet the oracle can build")
    weights, _ = _dtypes(w)
    t = w.training
    config = SliceConfig(
        kind="resnet", micro_batch_size=t.micro_batch_size, cnn_width=layout.width, cnn_blocks=layout.stages,
        cnn_bottleneck=layout.bottleneck, image_size=layout.image, num_classes=layout.classes,
    )  # fmt: skip
    previous = torch.get_default_dtype()
    torch.set_default_dtype(weights)  # parameters and BatchNorm buffers in that dtype, as `model.to(dtype)` makes them
    try:
        model = models.build_model(config, "cpu")
    finally:
        torch.set_default_dtype(previous)
    model.train()
    if t.trainable_fraction == 0.0:
        for p in model.parameters():
            p.requires_grad_(False)
    if t.activation_checkpointing:
        _checkpoint_torch(model, "full")
    kind = "bottleneck" if layout.bottleneck else "basic"
    description = (
        f"perfmodel.measure.models ResNet {layout.stages} {kind} {layout.image}px (plain PyTorch, "
        f"torch {torch.__version__}), {weights}"
    )
    layers: list[Any] = list(model.blocks)  # type: ignore[arg-type]
    return _Built(model=model, body=None, head=None, layers=layers, description=description, notes=[])


def _build_torch(w: Workload) -> _Built:


    m, t = w.model, w.training
    weights, _ = _dtypes(w)
    kind = "bert" if m.arch == "encoder" else "llama"
    config = SliceConfig(
        kind=kind, micro_batch_size=t.micro_batch_size, hidden_size=m.hidden_size, num_layers=m.num_layers,
        num_heads=m.num_heads, num_kv_heads=m.kv_heads, ffn_hidden_size=m.ffn_size, vocab_size=m.vocab_size or 30522,
        seq_len=t.seq_len, num_classes=2,
    )  # fmt: skip
    previous = torch.get_default_dtype()
    torch.set_default_dtype(weights)
    try:
        model = models.build_model(config, "cpu")
    finally:
        torch.set_default_dtype(previous)
    model.train()
    layers: list[Any] = list(model.blocks)  # type: ignore[arg-type]
    names = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
             "up": "up_proj" if kind == "llama" else "fc1", "down": "down_proj" if kind == "llama" else "fc2"}  # fmt: skip
    if t.trainable_fraction == 0.0:
        for p in model.parameters():
            p.requires_grad_(False)
    if t.lora_r:
        models.apply_lora(model, t.lora_r, tuple(names[x] for x in LORA_TARGET_ORDER[: t.lora_target_modules]))
    if t.activation_checkpointing:
        _checkpoint_torch(model, t.checkpointing_policy)
    description = f"perfmodel.measure.models {type(model).__name__} (plain PyTorch, torch {torch.__version__}), {weights}"
    return _Built(model=model, body=None, head=None, layers=layers, description=description, notes=[])


def _build_hf(w: Workload) -> _Built:
    import transformers  # an optional package (the dev extra): only transformers-built models need it

    transformers.logging.set_verbosity_error()  # its notes about use_cache and checkpointing

    m, t = w.model, w.training
    weights, _ = _dtypes(w)
    attention = "eager" if t.attention_kernel == "eager" else "sdpa"
    dropout = float(m.dropout)
    notes: list[str] = []
    config: Any
    model: Any
    body: Any
    head: Any
    previous = torch.get_default_dtype()
    torch.set_default_dtype(weights)
    try:
        d, layers_n, heads, ffn = int(m.hidden_size or 0), int(m.num_layers or 0), int(m.num_heads or 1), int(m.ffn_size)
        vocab = int(m.vocab_size or 30522)
        kw: dict[str, Any] = {"attn_implementation": attention}
        if m.arch == "encoder":
            config = transformers.BertConfig(
                hidden_size=d, num_hidden_layers=layers_n, num_attention_heads=heads, intermediate_size=ffn,
                vocab_size=vocab, max_position_embeddings=max(512, t.seq_len), hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=dropout, **{**kw, "num_labels": 2},
            )  # fmt: skip
            model = transformers.BertForSequenceClassification(config)
            body, head, layers = model.bert, None, list(model.bert.encoder.layer)
        elif m.gated_mlp:
            config = transformers.LlamaConfig(
                hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers_n, num_attention_heads=heads,
                num_key_value_heads=m.kv_heads, head_dim=int(m.head_width), vocab_size=vocab,
                tie_word_embeddings=m.tied_embeddings, max_position_embeddings=t.seq_len, attention_dropout=dropout,
                use_cache=recipe_of(w).kv_cache, **kw,
            )  # fmt: skip
            model = transformers.LlamaForCausalLM(config)
            body, head, layers = model.model, model.lm_head, list(model.model.layers)
        else:
            config = transformers.GPT2Config(
                n_embd=d, n_layer=layers_n, n_head=heads, n_inner=ffn, vocab_size=vocab,
                n_positions=max(t.seq_len, m.learned_pos_embeddings), resid_pdrop=dropout, embd_pdrop=dropout,
                attn_pdrop=dropout, use_cache=recipe_of(w).kv_cache, **kw,
            )  # fmt: skip
            model = transformers.GPT2LMHeadModel(config)
            body, head, layers = model.transformer, model.lm_head, list(model.transformer.h)
    finally:
        torch.set_default_dtype(previous)
    model.train()
    description = f"transformers {type(model).__name__} ({transformers.__version__}), {weights}"
    recipe = recipe_of(w)
    if m.arch == "decoder" and m.gated_mlp and recipe.fused:
        _fuse_like_liger(model, layers, recipe.fused)
        notes.append(f"fused {'/'.join(recipe.fused)} kernels saved as Liger-Kernel's save")
    if t.quantization_bits:
        for layer in layers:
            for name, module in _linears(layer, m.gated_mlp):
                _replace(layer, name, _Linear4bit(module))
        notes.append("base linear weights as bitsandbytes NF4 (packed uint8 + fp32 absmax per 64)")
    if t.lora_r or t.trainable_fraction == 0.0 or t.quantization_bits:
        for p in model.parameters():
            p.requires_grad_(False)
    if t.lora_r:
        targets = LORA_TARGET_ORDER[: t.lora_target_modules]
        for layer in layers:
            for name, module in _linears(layer, m.gated_mlp):
                if _role(name) in targets:
                    _replace(layer, name, _LoraLinear(module, t.lora_r, t.lora_dropout))
    if t.activation_checkpointing:
        _checkpoint_hf(model, t.checkpointing_policy)
    return _Built(model=model, body=body, head=head, layers=layers, description=description, notes=notes)


_ROLES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
    "down_proj": "down", "query": "q", "key": "k", "value": "v", "attention.output.dense": "o",
    "intermediate.dense": "up", "output.dense": "down",
}  # fmt: skip


def _role(name: str) -> str:
    for suffix, role in _ROLES.items():
        if name.endswith(suffix) and not (suffix == "output.dense" and "attention" in name):
            return role
    return ""


def _linears(layer: Any, gated: bool) -> list[tuple[str, Any]]:

    return [
        (n, mod) for n, mod in layer.named_modules()
        if (isinstance(mod, torch.nn.Linear) or hasattr(mod, "absmax")) and _role(n) and ".base_layer" not in n
    ]  # fmt: skip


def _replace(root: Any, dotted: str, new: Any) -> None:
    parent_name, _, child = dotted.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def _lora_class() -> type:

    class LoraLinear(torch.nn.Module):
        """PEFT's lora.Linear forward (see the module docstring)."""

        def __init__(self, base: Any, r: int, dropout: float) -> None:
            super().__init__()
            self.base_layer = base
            self.lora_A = torch.nn.Linear(base.in_features, r, bias=False, dtype=torch.float32)
            self.lora_B = torch.nn.Linear(r, base.out_features, bias=False, dtype=torch.float32)
            self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
            self.scaling = LORA_ALPHA / r

        def forward(self, x: Any) -> Any:
            result = self.base_layer(x)
            result_dtype = result.dtype
            if x.dtype != self.lora_A.weight.dtype:  # PEFT _cast_input_dtype
                x = x.to(self.lora_A.weight.dtype)
            result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
            return result.to(result_dtype)

    return LoraLinear


def _LoraLinear(base: Any, r: int, dropout: float) -> Any:  # noqa: N802 - a class factory
    return _lora_class()(base, r, dropout)


def _linear4bit_class() -> type:

    class MatMul4Bit(torch.autograd.Function):
        """bitsandbytes autograd/_functions.py MatMul4Bit: dequantise, matmul; keeps (A, B) in
        ctx.tensors when any input needs a gradient; backward dequantises again."""

        @staticmethod
        def forward(ctx: Any, a: Any, packed: Any, absmax: Any, shape: tuple[int, int], dtype: Any) -> Any:
            weight = _dequantize(packed, absmax, shape, dtype)
            out = torch.nn.functional.linear(a, weight)
            ctx.tensors = (a, packed, absmax)
            ctx.shape, ctx.dtype = shape, dtype
            return out

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            _, packed, absmax = ctx.tensors
            weight = _dequantize(packed, absmax, ctx.shape, ctx.dtype)
            return torch.matmul(grad.to(ctx.dtype), weight), None, None, None, None

    def _dequantize(packed: Any, absmax: Any, shape: tuple[int, int], dtype: Any) -> Any:
        # bitsandbytes' dequantize kernel writes one tensor of the compute dtype (its values do not
        # matter to memory)
        return torch.empty(shape, dtype=dtype, device=packed.device)

    class Linear4bit(torch.nn.Module):
        def __init__(self, base: Any) -> None:
            super().__init__()
            out_f, in_f = base.weight.shape
            self.in_features, self.out_features = in_f, out_f
            self.shape = (out_f, in_f)
            self.compute_dtype = base.weight.dtype if base.weight.dtype != torch.float32 else torch.bfloat16
            self.weight = torch.nn.Parameter(torch.empty(out_f * in_f // 2, dtype=torch.uint8), requires_grad=False)
            self.absmax = torch.nn.Parameter(
                torch.empty(math.ceil(out_f * in_f / NF4_BLOCK), dtype=torch.float32), requires_grad=False
            )

        def forward(self, x: Any) -> Any:
            in_dtype = x.dtype
            x = x.to(self.compute_dtype)
            return MatMul4Bit.apply(x, self.weight, self.absmax, self.shape, self.compute_dtype).to(in_dtype)

    return Linear4bit


def _Linear4bit(base: Any) -> Any:  # noqa: N802 - a class factory
    return _linear4bit_class()(base)


def _liger_functions() -> dict[str, Any]:
    """Autograd functions with the memory behaviour of Liger-Kernel's Triton kernels
    (linkedin/Liger-Kernel src/liger_kernel/ops/): what they allocate and what they save."""

    class RMSNorm(torch.autograd.Function):
        """rms_norm.py LigerRMSNormFunction: Y new; saves X, W and RSTD (fp32, one per row)."""

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any) -> Any:
            y = torch.empty_like(x)
            rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
            ctx.save_for_backward(x, weight, rstd)
            return y

        @staticmethod
        def backward(ctx: Any, dy: Any) -> Any:
            x, weight, _ = ctx.saved_tensors
            dw = torch.empty(weight.shape, dtype=weight.dtype, device=x.device) if ctx.needs_input_grad[1] else None
            return torch.empty_like(x), dw

    class SiLUMul(torch.autograd.Function):
        """swiglu.py LigerSiLUMulFunction: c new; saves a and b; backward writes da, db into them."""

        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            ctx.save_for_backward(a, b)
            return torch.empty_like(a)

        @staticmethod
        def backward(ctx: Any, dc: Any) -> Any:
            a, b = ctx.saved_tensors
            return a.detach(), b.detach()

    class Rope(torch.autograd.Function):
        """rope.py LigerRopeFunction: q and k rotated in place (no new tensor: returned as views of
        the inputs here); saves cos and sin."""

        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, cos: Any, sin: Any) -> Any:
            ctx.save_for_backward(cos, sin)
            return q.view_as(q), k.view_as(k)

        @staticmethod
        def backward(ctx: Any, dq: Any, dk: Any) -> Any:
            return dq, dk, None, None

    return {"norm": RMSNorm, "activation": SiLUMul, "rotary": Rope}


def _fuse_like_liger(model: Any, layers: list[Any], kinds: tuple[str, ...]) -> None:
    import transformers.models.llama.modeling_llama as llama  # the optional package, as in _build_hf

    fns = _liger_functions()
    if "norm" in kinds:
        for module in model.modules():
            if isinstance(module, llama.LlamaRMSNorm):
                setattr(module, "forward", lambda x, _m=module: fns["norm"].apply(x, _m.weight))  # noqa: B010
    if "activation" in kinds:
        for layer in layers:
            mlp = layer.mlp
            setattr(mlp, "forward", lambda x, _m=mlp: _m.down_proj(fns["activation"].apply(_m.gate_proj(x), _m.up_proj(x))))  # noqa: B010
    if "rotary" in kinds:
        model._oracle_rope = fns["rotary"]


@contextlib.contextmanager
def _rope_patched(model: Any) -> Iterator[None]:
    """Hugging Face Llama's apply_rotary_pos_emb replaced by the fused rotary function while the
    step runs (the module-level function is what LlamaAttention calls)."""
    rope = getattr(model, "_oracle_rope", None)
    if rope is None:
        yield
        return
    import transformers.models.llama.modeling_llama as llama  # the optional package, as in _build_hf

    original = llama.apply_rotary_pos_emb

    def fused(q: Any, k: Any, cos: Any, sin: Any, *args: Any, **kwargs: Any) -> Any:
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # Liger works on the physical (b, s, h, d) layout
        q, k = rope.apply(q, k, cos, sin)
        return q.transpose(1, 2), k.transpose(1, 2)

    llama.apply_rotary_pos_emb = fused
    try:
        yield
    finally:
        llama.apply_rotary_pos_emb = original


@contextlib.contextmanager
def _cuda_dispatch() -> Iterator[None]:
    """Where PyTorch's CPU kernels keep other tensors than its CUDA kernels, the CUDA behaviour:
      * F.rms_norm: aten _fused_rms_norm is one CUDA kernel whose backward keeps the input, rstd
        (fp32, one per row) and the weight (tools/autograd/derivatives.yaml `_fused_rms_norm`; the
        CPU runs the composite, which keeps fp32 copies);
      * F.scaled_dot_product_attention with dropout: FlashAttention keeps only its RNG state, where
        the CPU falls back to the math path (which keeps the s x s probabilities); the oracle runs
        it without dropout;
      * F.dropout: CUDA runs aten native_dropout, which keeps a 1-byte mask; the CPU runs the
        composite `input * noise`, which keeps a noise tensor of the input's dtype
        (aten/src/ATen/native/Dropout.cpp is_fused_kernel_acceptable);
      * F.softmax under autocast: CUDA's autocast runs it in fp32 (aten/src/ATen/autocast_mode.cpp
        fp32 list), the CPU's leaves it in 16-bit."""

    functional = torch.nn.functional
    rms_norm, sdpa, dropout = functional.rms_norm, functional.scaled_dot_product_attention, functional.dropout
    softmax = functional.softmax
    fused = _fused_rms_norm_class()

    def cuda_rms_norm(x: Any, shape: Any, weight: Any = None, eps: Any = None) -> Any:
        if FUSED_RMS_NORM_ON_CUDA and weight is not None and weight.dtype == x.dtype and len(shape) == 1:
            return fused.apply(x, weight)
        return rms_norm(x, shape, weight, eps)

    def flash_sdpa(*args: Any, **kwargs: Any) -> Any:
        kwargs["dropout_p"] = 0.0
        return sdpa(*args, **kwargs)

    def fused_dropout(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        if training and 0 < p < 1 and not inplace:
            return torch.native_dropout(x, p, True)[0]
        return dropout(x, p, training, inplace)

    def fp32_softmax(x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
        if dtype is None and x.dtype in (torch.float16, torch.bfloat16) and torch.is_autocast_enabled("cpu"):
            dtype = torch.float32  # CUDA autocast's fp32 list has softmax; the CPU's does not
        return softmax(x, dim=dim, dtype=dtype)

    patched = {"rms_norm": cuda_rms_norm, "scaled_dot_product_attention": flash_sdpa, "dropout": fused_dropout,
               "softmax": fp32_softmax}  # fmt: skip
    originals = {name: getattr(functional, name) for name in patched}
    for name, fn in patched.items():
        setattr(functional, name, fn)
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(functional, name, fn)


def _fused_rms_norm_class() -> Any:

    class FusedRMSNorm(torch.autograd.Function):
        """aten _fused_rms_norm on CUDA: output in the input's dtype, rstd fp32 per row; backward
        keeps input, rstd, weight."""

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any) -> Any:
            rstd = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
            ctx.save_for_backward(x, rstd, weight)
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx: Any, dy: Any) -> Any:
            x, _, weight = ctx.saved_tensors
            dw = torch.empty_like(weight) if ctx.needs_input_grad[1] else None
            return torch.empty_like(x), dw

    return FusedRMSNorm


TORCHTITAN_SAVE_OPS = (
    "mm.default", "_scaled_dot_product_flash_attention_for_cpu.default", "_scaled_dot_product_flash_attention.default",
    "_scaled_dot_product_efficient_attention.default", "max.default",
)  # fmt: skip
"""torchtitan's per-op selective checkpointing keeps the outputs of these ops (torchtitan
distributed/activation_checkpoint.py _save_list), except every second matmul."""


def selective_context_fn() -> Callable[[], Any]:
    """torch.utils.checkpoint context_fn implementing torchtitan's per-op selective policy."""

    save = {getattr(torch.ops.aten, name.split(".")[0]).default for name in TORCHTITAN_SAVE_OPS}
    mm = torch.ops.aten.mm.default

    def context_fn() -> Any:
        counts = {"forward": 0, "recompute": 0}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            mode_key = "recompute" if ctx.is_recompute else "forward"
            if func == mm:
                counts[mode_key] += 1
            keep = func in save and not (func == mm and counts[mode_key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    return context_fn


def _checkpoint_hf(model: Any, policy: str) -> None:
    """transformers' own activation checkpointing (non-reentrant, its 5.x default), with
    torchtitan's selective policy as the context_fn when asked."""
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if policy == "selective":
        kwargs["context_fn"] = selective_context_fn()
    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)


def _checkpoint_torch(model: Any, policy: str) -> None:
    """perfmodel.measure.models' own checkpointing (torch.utils.checkpoint around every block), with the
    selective policy as its context_fn when asked."""

    if policy == "full":
        model.activation_checkpointing = True
        return
    context_fn = selective_context_fn()
    model._run_block = lambda block, *args: checkpoint(block, *args, use_reentrant=False, context_fn=context_fn)


class _Step:
    """One optimizer step of the built model: its inputs, optimizers and the step itself."""

    def __init__(self, w: Workload, built: _Built) -> None:
        self.w, self.built = w, built
        self.recipe = recipe_of(w)
        self.optimizers: list[Any] = []
        self.inputs: list[Any] = []
        self.paged_bytes = 0
        self.trainable: list[Any] = []

    def prepare(self) -> None:
        """Inputs, optimizers and their states (created once, as after the first step)."""

        w, t = self.w, self.w.training
        b, s = t.micro_batch_size, t.seq_len
        if w.model.arch == "cnn":  # images in the parameters' dtype and class labels, as models.ResNet.synthetic_batch
            layout = resnet_layout(w)
            side, classes = (layout.image, layout.classes) if layout else (224, 1000)
            images = torch.randn(b, 3, side, side, dtype=_dtypes(w)[0])
            self.inputs = [images, torch.randint(0, classes, (b,))]
        else:
            vocab = w.model.vocab_size or 30522
            ids = torch.randint(0, vocab, (b, s))
            labels = torch.randint(0, 2, (b,)) if w.model.arch == "encoder" else ids
            self.inputs = [ids, labels]
        self.trainable = [p for p in self.built.model.parameters() if p.requires_grad]
        if not self.trainable or t.optimizer == "none":
            return
        state = t.optimizer_state or self.recipe.optimizer_state
        in_backward = t.optimizer_in_backward
        in_backward = self.recipe.optimizer_in_backward if in_backward is None else in_backward
        groups = [[p] for p in self.trainable] if in_backward else [self.trainable]
        self.optimizers = [self._optimizer(group, state) for group in groups]
        for p in self.trainable:  # one step to create the states
            p.grad = torch.zeros_like(p)
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        if in_backward:
            by_param = {id(group[0]): opt for group, opt in zip(groups, self.optimizers, strict=True)}

            def step_now(p: Any) -> None:
                opt = by_param[id(p)]
                opt.step()
                opt.zero_grad(set_to_none=True)

            for p in self.trainable:
                p.register_post_accumulate_grad_hook(step_now)
        self.in_backward = in_backward

    def _optimizer(self, params: list[Any], state: str) -> Any:

        t = self.w.training
        impl = self.recipe.optimizer_impl
        kw: dict[str, Any] = {"foreach": True} if impl == "foreach" else {"fused": True} if impl == "fused" else {"foreach": False}
        if t.optimizer in ("sgd", "sgd_momentum"):
            kw.pop("fused", None) if impl == "fused" else None
            return torch.optim.SGD(params, lr=1e-3, momentum=0.9 if t.optimizer == "sgd_momentum" else 0.0, **kw)
        if t.optimizer == "adafactor":
            return torch.optim.Adafactor(params, lr=1e-3, foreach=impl == "foreach")
        if state != "fp32":
            opt = _bnb_adam_class()(params, paged=state.startswith("paged"))
            self.paged_bytes += opt.paged_bytes
            return opt
        cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
        return cls(params, lr=1e-4, **kw)

    def run(self, tracker: Any) -> None:

        t = self.w.training
        _, cast = _dtypes(self.w)
        micro_batches = min(t.grad_accum_steps, 2)
        with _rope_patched(self.built.model), _cuda_dispatch():
            for i in range(micro_batches):
                if i and tracker is not None:
                    tracker.reset_mod_stats()
                autocast = torch.autocast("cpu", dtype=cast) if cast is not None else contextlib.nullcontext()
                if not self.trainable:
                    with torch.no_grad(), autocast:
                        self._loss()
                    return
                with autocast:
                    loss = self._loss() / t.grad_accum_steps
                loss.backward()
                del loss
            if self.optimizers and not getattr(self, "in_backward", False):
                torch.nn.utils.clip_grad_norm_(self.trainable, 1.0)
                for opt in self.optimizers:
                    opt.step()
                    opt.zero_grad(set_to_none=True)

    def _loss(self) -> Any:

        ids, labels = self.inputs
        model, built = self.built.model, self.built
        if self.w.model.arch == "cnn":
            return model.loss({"images": ids, "labels": labels})
        if built.body is None:  # this project's plain-PyTorch model
            return model.loss({"tokens": ids, "labels": labels})
        if self.w.model.arch == "encoder" or self.recipe.loss == "materialized" and "loss" not in self.recipe.fused:
            return model(input_ids=ids, labels=labels).loss  # the outputs (logits) are dropped with it
        outputs = built.body(input_ids=ids)  # held through the loss, as a model's own forward holds it
        hidden = outputs.last_hidden_state
        head = built.head
        if self.recipe.loss == "chunked":  # torchtune CEWithChunkedOutputLoss
            # the head's weight applied chunk by chunk (one module call per chunk would be several
            # calls of one module in a step, which MemTracker refuses)
            chunks = [torch.nn.functional.linear(h, head.weight) for h in hidden.tensor_split(TORCHTUNE_LOSS_CHUNKS, dim=1)]
            targets = labels.tensor_split(TORCHTUNE_LOSS_CHUNKS, dim=1)
            total = sum(
                torch.nn.functional.cross_entropy(c.float().flatten(0, 1), y.flatten(), reduction="sum")
                for c, y in zip(chunks, targets, strict=True)
            )
            return total / labels.numel()
        flce = _flce_class()
        return flce.apply(hidden.flatten(0, 1), head.weight, labels.flatten())


def _flce_class() -> Any:

    class FusedLinearCrossEntropy(torch.autograd.Function):
        """Liger-Kernel fused_linear_cross_entropy.py: the LM head and the loss chunk by chunk in
        forward; each chunk's logits (input dtype) are turned into their gradient in place, the
        input's and the weight's gradients are accumulated in forward and saved for backward."""

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any, target: Any) -> Any:
            tokens, hidden = x.shape
            vocab = weight.shape[0]
            inc = -(-vocab // hidden)
            chunk = 1 << max(0, math.ceil(math.log2(max(1, -(-tokens // inc)))))
            grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
            grad_input = torch.zeros_like(x)
            losses = torch.zeros(tokens, dtype=torch.float32, device=x.device)
            for start in range(0, tokens, chunk):
                part = x[start : start + chunk]
                logits = part @ weight.t()
                grad_input[start : start + chunk] = logits @ weight
                if grad_weight is not None:
                    torch.addmm(grad_weight, logits.t(), part, out=grad_weight)
                del logits
            ctx.save_for_backward(grad_input, grad_weight)
            return losses.sum()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            grad_input, grad_weight = ctx.saved_tensors
            return grad_input, grad_weight, None

    return FusedLinearCrossEntropy


def _bnb_adam_class() -> type:

    class Adam8bit(torch.optim.Optimizer):
        """bitsandbytes Optimizer8bit / PagedAdamW8bit states: uint8 first and second moments with
        an fp32 absmax per 256 elements (tensors of 4096 elements or more), fp32 otherwise; the
        step runs in one fused kernel, in place. Paged states are allocated in CUDA managed memory
        (F.get_paged), which the PyTorch allocator never sees: they are kept out of `state`."""

        def __init__(self, params: list[Any], paged: bool) -> None:
            super().__init__(params, {"lr": 1e-4})
            self.paged = paged
            self.paged_bytes = 0
            self.managed: dict[int, list[Any]] = {}

        @torch.no_grad()
        def step(self, closure: Any = None) -> Any:  # type: ignore[override]
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self._init(p)
                    p.add_(p.grad, alpha=-group["lr"])  # in place, as the fused 8-bit kernel

        def _init(self, p: Any) -> None:
            if id(p) in self.managed or self.state.get(p):
                return
            n = p.numel()
            if n >= BNB_8BIT_MIN_SIZE:
                blocks = -(-n // BNB_8BIT_BLOCK)
                tensors = {
                    "state1": torch.zeros(n, dtype=torch.uint8, device=p.device),
                    "state2": torch.zeros(n, dtype=torch.uint8, device=p.device),
                    "absmax1": torch.zeros(blocks, dtype=torch.float32, device=p.device),
                    "absmax2": torch.zeros(blocks, dtype=torch.float32, device=p.device),
                }
            else:
                tensors = {
                    "state1": torch.zeros(n, dtype=torch.float32, device=p.device),
                    "state2": torch.zeros(n, dtype=torch.float32, device=p.device),
                }
            if self.paged:
                self.managed[id(p)] = list(tensors.values())
                self.paged_bytes += sum(x.numel() * x.element_size() for x in tensors.values())
            else:
                self.state[p] = tensors

    return Adam8bit


def kernel_benchmark_peak_mib(kernel: str, provider: str, x_value: int, config: dict[str, Any]) -> float:
    """The peak allocated memory (MiB) of one of Liger-Kernel's memory benchmarks
    (benchmark/scripts/benchmark_{rms_norm,swiglu}.py, `full` mode: forward, then backward with a
    random output gradient, retain_graph=True, its steady state over repeated calls), with the
    eager (`huggingface`) module or the fused kernel's memory behaviour (`liger`, as the oracle
    emulates it): how much a fused kernel saves, to check against the benchmark's measured rows.
    kernel: rms_norm (config M; x_value = hidden size) or swiglu (config B, hidden_size,
    intermediate_size; x_value = sequence length)."""
    import transformers.models.llama.modeling_llama as llama  # the optional package, as in _build_hf

    fns = _liger_functions()
    dtype = torch.bfloat16
    with warnings.catch_warnings(), _cuda_rounding(mem_tracker), FakeTensorMode(allow_non_fake_inputs=True):
        warnings.filterwarnings("ignore", message="Module is None", category=UserWarning)
        if kernel == "rms_norm":
            module: Any = llama.LlamaRMSNorm(x_value)  # fp32 weight, as the benchmark builds it
            if provider == "liger":
                setattr(module, "forward", lambda t, _m=module: fns["norm"].apply(t, _m.weight))  # noqa: B010
            x = torch.randn(int(config["M"]), x_value, dtype=dtype, requires_grad=True)
        elif kernel == "swiglu":
            cfg = transformers_llama_config(config["hidden_size"], config["intermediate_size"])
            previous = torch.get_default_dtype()
            torch.set_default_dtype(dtype)
            try:
                module = llama.LlamaMLP(cfg)
            finally:
                torch.set_default_dtype(previous)
            if provider == "liger":
                setattr(module, "forward", lambda t, _m=module: _m.down_proj(fns["activation"].apply(_m.gate_proj(t), _m.up_proj(t))))  # noqa: B010
            x = torch.randn(int(config["B"]), x_value, int(config["hidden_size"]), dtype=dtype, requires_grad=True)
        else:
            raise ValueError(f"no memory benchmark for kernel {kernel!r}")

        def full() -> None:
            y = module(x)
            y.backward(torch.randn_like(y), retain_graph=True)

        full()  # the gradients of x and of the weights exist from the second call on
        tracker = _tracker_class(mem_tracker)()
        tracker.track_external(module, x, x.grad)
        with tracker:
            full()
        peak = tracker.get_tracker_snapshot("peak")
    device = next(iter(peak))
    return float(peak[device]["Total"]) / 2**20


def transformers_llama_config(hidden: int, intermediate: int) -> Any:
    import transformers  # an optional package (the dev extra)

    return transformers.LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, hidden_act="silu")
