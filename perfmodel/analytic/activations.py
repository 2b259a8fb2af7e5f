"""What eager PyTorch keeps for backward in one transformer layer, kernel by kernel, as the
framework recipe runs it (perfmodel.recipes: which kernels are fused, how an unfused norm runs,
how grouped K/V heads meet attention, the LoRA adapters' dtype).

The layer's forward is written out below op by op, as the module source runs it (transformers
LlamaDecoderLayer / GPT2Block / BertLayer, this project's perfmodel/measure/models.py, Liger-Kernel's
autograd functions), over symbolic tensors that carry a width, a dtype and whether they require a
gradient. Each op keeps what its autograd definition keeps (PyTorch tools/autograd/derivatives.yaml;
the generated code saves an input only when a gradient that needs it is required):
  * mm / addmm (every linear): `self` (the input) when the weight needs a gradient, `mat2` (the
    weight, or its autocast copy) when the input does;
  * pow.Tensor_Scalar, silu, gelu keep `self`; rsqrt, tanh, _softmax, _log_softmax keep `result`;
    mul.Tensor keeps each factor for the other's gradient; add, _to_copy, view, transpose,
    neg, cat and multiplies by a Python scalar keep nothing;
  * native_layer_norm keeps input, mean and rstd; native_dropout its 1-byte mask;
  * _scaled_dot_product_flash_attention (and the memory-efficient kernel) keep query, key,
    value, output and the fp32 logsumexp;
  * under autocast (amp_*) every matmul casts its input to 16-bit anew (activations are not
    cached), and the 16-bit copy of each weight lives until that weight's backward
    (perfmodel.analytic.memory counts those copies once per model).
A tensor kept by several ops is counted once. Bytes are per token of one micro-batch, on one GPU
before sharding (perfmodel.analytic.memory divides). tests/test_memory_kernels.py checks each
kernel against torch.autograd.graph.saved_tensors_hooks on real CPU tensors, and
tests/test_memory_oracle.py the whole step against the FakeTensor oracle.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from perfmodel.catalog.frameworks import recipe_of
from perfmodel.workload import Workload

LORA_TARGET_ORDER = ("q", "v", "k", "o", "gate", "up", "down")
"""Which weight matrices `training.lora_target_modules` = n adapts: the first n of these (2 = PEFT's
default q, v; 4 = every attention projection; 7 = every linear of a layer). Models without a gate
projection skip it."""


def lora_order(gated_mlp: bool) -> tuple[str, ...]:
    """The linear layers of a block in LORA_TARGET_ORDER, the gate projection only where the MLP has one."""
    return LORA_TARGET_ORDER if gated_mlp else tuple(x for x in LORA_TARGET_ORDER if x != "gate")


FP32 = 4
MASK = 1
"""Bytes per element of a dropout mask (torch.bool)."""


@dataclass(frozen=True, eq=False)
class T:
    """A symbolic tensor: bytes per token, whether it requires a gradient, its dtype's width."""

    name: str
    width: float
    """Elements per token."""
    dtype: int
    """Bytes per element."""
    grad: bool

    @property
    def nbytes(self) -> float:
        return self.width * self.dtype


@dataclass(frozen=True, kw_only=True)
class Saved:
    """One tensor kept for backward."""

    kernel: str
    """The kernel kind that keeps it: norm, attention, rotary, activation, mlp, lora, dropout,
    quantized, checkpoint."""
    what: str
    bytes_per_token: float


class _Trace:
    """Ops over symbolic tensors that record what autograd keeps (see the module docstring)."""

    def __init__(self, amp: bool) -> None:
        self.amp = amp
        self.kept: dict[int, Saved] = {}
        self._alive: list[T] = []
        """Every tensor seen, held so that no id is reused while the trace runs."""
        self.mm_outputs: list[T] = []
        """Matmul outputs in forward order (torchtitan's selective policy keeps every other one)."""
        self.sdpa_outputs: list[T] = []

    def keep(self, t: T, kernel: str, why: str) -> None:
        self._alive.append(t)
        if id(t) not in self.kept and t.nbytes:
            self.kept[id(t)] = Saved(kernel=kernel, what=f"{t.name} ({why})", bytes_per_token=t.nbytes)

    @staticmethod
    def new(name: str, width: float, dtype: int, *inputs: T | bool) -> T:
        grad = any(x if isinstance(x, bool) else x.grad for x in inputs)
        return T(name, width, dtype, grad)

    def to(self, x: T, dtype: int, name: str) -> T:
        return x if x.dtype == dtype else self.new(name, x.width, dtype, x)

    def linear(self, x: T, out_width: float, *, weight_grad: bool, kernel: str, name: str, out_dtype: int | None = None) -> T:
        """x @ W^T: mm keeps the input when W trains; under autocast the input is a fresh 16-bit copy."""
        src = self.to(x, 2, f"{x.name} cast for {name}") if self.amp else x
        if weight_grad:
            self.keep(src, "autocast" if src is not x else kernel, f"{name} keeps its input for the weight's gradient")
        self.mm_outputs.append(out := self.new(f"{name} output", out_width, out_dtype or src.dtype, x, weight_grad))
        return out

    def mul(self, a: T, b: T | None, name: str, kernel: str, *, b_grad: bool = False, b_dtype: int = 0) -> T:
        """a * b (b None: a parameter or constant, with b_grad / b_dtype): each factor is kept for
        the other's gradient."""
        b_needs = b.grad if b is not None else b_grad
        if b_needs:
            self.keep(a, kernel, f"mul keeps it for the gradient of {name}'s other factor")
        if a.grad and b is not None:
            self.keep(b, kernel, f"mul keeps it for the gradient of {name}'s other factor")
        dtype = max(a.dtype, b.dtype if b is not None else b_dtype)
        return self.new(name, a.width, dtype, a, b_needs)


@dataclass(frozen=True, kw_only=True)
class Layer:
    """What one layer keeps, and what its matmuls and attention output (for the selective policy)."""

    saved: tuple[Saved, ...]
    mm_outputs: tuple[float, ...]
    """Bytes per token of each matmul output, in forward order."""
    sdpa_outputs: float
    """Bytes per token of the attention kernel's outputs (output + logsumexp)."""

    @property
    def bytes_per_token(self) -> float:
        return sum(s.bytes_per_token for s in self.saved)

    def by_kernel(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.saved:
            out[s.kernel] = out.get(s.kernel, 0.0) + s.bytes_per_token
        return out


@dataclass(frozen=True)
class LayerKey:
    """Everything a layer's saved set depends on (hashable, for the cache)."""

    d: float
    q: float
    kv: float
    f: float
    heads: float
    seq: float
    arch: str
    gated: bool
    precision: str
    attention: str
    dropout: float
    targets: tuple[str, ...]
    lora_r: int
    lora_dropout: float
    full: bool
    quantized: bool
    input_grad: bool
    fused: tuple[str, ...]
    """The recipe's fused kernel kinds (perfmodel.recipes.FrameworkRecipe.fused)."""
    native_norm: bool
    kv_cache: bool
    """The model copies keys and values into a KV cache that attention then reads (transformers
    with use_cache, no checkpointing)."""
    """torch.nn.RMSNorm (aten rms_norm) instead of the module's own fp32 upcast."""
    gqa: str
    lora_dtype: str


def layer_key(w: Workload, *, first: bool) -> LayerKey:
    m, t = w.model, w.training
    recipe = recipe_of(w)
    order = lora_order(m.gated_mlp)
    targets = order[: t.lora_target_modules] if t.lora_r else ()
    full = not t.lora_r and t.trainable_fraction != 0 and not t.quantization_bits
    return LayerKey(
        d=float(m.hidden_size or 0), q=m.attention_width, kv=m.kv_heads * m.head_width, f=float(m.ffn_size),
        heads=float(m.num_heads or 1), seq=float(t.seq_len), arch=m.arch, gated=m.gated_mlp, precision=t.precision,
        attention=t.attention_kernel, dropout=float(m.dropout), targets=targets, lora_r=int(t.lora_r or 0),
        lora_dropout=float(t.lora_dropout), full=full, quantized=bool(t.quantization_bits),
        input_grad=full if first else (full or bool(targets)), fused=recipe.fused, native_norm=recipe.native_norm,
        kv_cache=recipe.kv_cache and not t.activation_checkpointing,
        gqa=recipe.gqa, lora_dtype=recipe.lora_dtype,
    )  # fmt: skip


def layer(w: Workload, *, first: bool = False) -> Layer:
    """What one transformer layer keeps for backward (`first`: the layer after the embedding,
    whose input needs no gradient when the embedding is frozen)."""
    return _layer(layer_key(w, first=first))


@functools.lru_cache(maxsize=4096)
def _layer(k: LayerKey) -> Layer:
    amp = k.precision.startswith("amp")
    res = 4 if k.precision in ("fp32", "tf32") or amp else 2
    act = 4 if k.precision in ("fp32", "tf32") else 2
    tr = _Trace(amp)
    x = T("layer input", k.d, res, k.input_grad)
    if k.gated:
        _llama_layer(tr, k, x, res, act)
    elif k.arch == "encoder":
        _bert_layer(tr, k, x, res, act)
    else:
        _gpt2_layer(tr, k, x, res, act)
    return Layer(
        saved=tuple(tr.kept.values()),
        mm_outputs=tuple(o.nbytes for o in tr.mm_outputs),
        sdpa_outputs=sum(o.nbytes for o in tr.sdpa_outputs),
    )


# --- building blocks ----------------------------------------------------------------------------


def _proj(tr: _Trace, k: LayerKey, x: T, role: str, out_width: float, res: int, act: int) -> T:
    """One projection: the base linear (trainable, frozen or 4-bit) plus its LoRA adapter."""
    kernel = "mlp" if role in ("gate", "up", "down") else "attention"
    if k.quantized:  # bitsandbytes Linear4bit: x.to(compute dtype); MatMul4Bit keeps A in ctx.tensors
        a = tr.to(x, 2 if res == 4 or act == 2 else act, f"{x.name} in the compute dtype")
        out = tr.new(f"{role} output", out_width, a.dtype, a)
        if a.grad:
            tr.keep(a, "quantized", "MatMul4Bit keeps its input (ctx.tensors)")
        tr.mm_outputs.append(out)
        out = tr.to(out, x.dtype if x.dtype != a.dtype else out.dtype, f"{role} output in the input dtype")
    else:
        out = tr.linear(x, out_width, weight_grad=k.full, kernel=kernel, name=f"{role}_proj")
    if role not in k.targets:
        return out
    adapter = 4 if k.lora_dtype == "fp32" or res == 4 else res
    src = x if tr.amp or x.dtype == adapter else tr.new(f"{role} adapter input ({adapter}-byte copy)", x.width, adapter, x)
    if k.lora_dropout:
        if src.grad:
            tr.keep(T(f"{role} adapter dropout mask", x.width, MASK, False), "dropout", "native_dropout keeps its mask")
        src = tr.new(f"{role} adapter dropout output", x.width, src.dtype, src)
    low = tr.linear(src, k.lora_r, weight_grad=True, kernel="lora", name=f"{role} lora_A", out_dtype=2 if tr.amp else adapter)
    up = tr.linear(low, out_width, weight_grad=True, kernel="lora", name=f"{role} lora_B", out_dtype=2 if tr.amp else adapter)
    total = tr.new(f"{role} output + adapter", out_width, max(out.dtype, up.dtype), out, up)
    return tr.to(total, out.dtype, f"{role} output")


def _rms_norm(tr: _Trace, k: LayerKey, x: T, res: int, name: str) -> T:
    weight_grad = k.full
    if "norm" in k.fused:  # Liger LigerRMSNormFunction: save_for_backward(X, W, RSTD)
        if x.grad or weight_grad:
            tr.keep(x, "norm", f"{name}: fused RMSNorm keeps its input")
            tr.keep(T(f"{name} rstd", 1, FP32, False), "norm", "fused RMSNorm keeps rstd")
        return tr.new(f"{name} output", x.width, x.dtype, x, weight_grad)
    h = tr.to(x, FP32, f"{name} fp32 input")  # transformers: hidden_states.to(torch.float32)
    if h.grad:
        tr.keep(h, "norm", f"{name}: pow keeps self")
        tr.keep(T(f"{name} rstd", 1, FP32, False), "norm", "rsqrt keeps its result")
    normed = tr.new(f"{name} normalised", x.width, FP32, h)
    if not k.native_norm:  # transformers / torchtune: weight * normed.to(input_dtype)
        low = tr.to(normed, x.dtype, f"{name} normalised in the input dtype")
        return tr.mul(low, None, f"{name} output", "norm", b_grad=weight_grad, b_dtype=res)
    # aten rms_norm composite: (upcast * rstd) * weight in fp32, then type_as(input)
    prod = tr.mul(normed, None, f"{name} weighted", "norm", b_grad=weight_grad, b_dtype=res)
    return tr.to(prod, x.dtype, f"{name} output")


def _layer_norm(tr: _Trace, k: LayerKey, x: T, name: str) -> T:
    if x.grad or k.full:  # native_layer_norm keeps input, mean, rstd
        tr.keep(x, "norm", f"{name}: native_layer_norm keeps its input")
        tr.keep(T(f"{name} mean and rstd", 2, FP32, False), "norm", "native_layer_norm keeps mean, rstd")
    return tr.new(f"{name} output", x.width, x.dtype, x, k.full)


def _dropout(tr: _Trace, k: LayerKey, x: T, name: str) -> T:
    if not k.dropout:
        return x
    if x.grad:
        tr.keep(T(f"{name} dropout mask", x.width, MASK, False), "dropout", "native_dropout keeps its mask")
    return tr.new(f"{name} dropout output", x.width, x.dtype, x)


def _sdpa(tr: _Trace, k: LayerKey, q: T, key: T, v: T, act: int) -> T:
    if tr.amp:  # autocast casts SDPA's inputs to 16-bit
        q, key, v = (tr.to(t, 2, f"{t.name} cast for attention") for t in (q, key, v))
    out = tr.new("attention output", k.q, act if not tr.amp else 2, q, key, v)
    if k.attention == "eager":
        return _eager_attention(tr, k, q, key, v, out)
    lse = T("attention logsumexp", k.heads, FP32, False)
    if out.grad:
        for t in (q, key, v, out):
            tr.keep(t, "attention", "flash/SDPA keeps query, key, value, output")
        tr.keep(lse, "attention", "flash/SDPA keeps its fp32 logsumexp")
    tr.sdpa_outputs.extend((out, lse))
    return out


def _eager_attention(tr: _Trace, k: LayerKey, q: T, key: T, v: T, out: T) -> T:
    """transformers eager_attention_forward: q @ k^T * scaling (+ mask), softmax in fp32, back to
    q's dtype, dropout, @ v, then transpose().contiguous()."""
    scores = k.heads * k.seq
    if q.grad or key.grad:
        tr.keep(q, "attention", "matmul(q, k^T) keeps both factors")
        tr.keep(key, "attention", "matmul(q, k^T) keeps both factors")
    probs = T("attention probabilities (fp32 softmax result)", scores, FP32, out.grad)
    if probs.grad:
        tr.keep(probs, "attention", "_softmax keeps its result")
    p = tr.to(probs, 2 if tr.amp or q.dtype == 2 else q.dtype, "attention probabilities in q's dtype")
    p = _dropout(tr, k, p, "attention-probability")
    if p.grad or v.grad:
        tr.keep(p, "attention", "matmul(p, v) keeps both factors")
        tr.keep(v, "attention", "matmul(p, v) keeps both factors")
    return tr.new("attention output, contiguous", k.q, out.dtype, out)


def _rotary(tr: _Trace, k: LayerKey, x: T, res: int, name: str) -> T:
    """q * cos + rotate_half(q) * sin, cos/sin in the residual dtype (kept once per model: the
    memory model counts them): mul keeps only the constant for q's gradient. Liger rotates in
    place."""
    if "rotary" in k.fused:
        return x
    return tr.new(f"{name} after rotary", x.width, max(x.dtype, res), x)


# --- the layers ---------------------------------------------------------------------------------


def _llama_layer(tr: _Trace, k: LayerKey, x: T, res: int, act: int) -> None:
    """transformers LlamaDecoderLayer (and this project's LlamaBlock, torchtune's, Liger-patched)."""
    h = _rms_norm(tr, k, x, res, "input norm")
    q = _rotary(tr, k, _proj(tr, k, h, "q", k.q, res, act), res, "query")
    key = _rotary(tr, k, _proj(tr, k, h, "k", k.kv, res, act), res, "key")
    v = _proj(tr, k, h, "v", k.kv, res, act)
    if k.gqa == "repeat" and k.kv < k.q:  # repeat_interleave / repeat_kv: new tensors
        key = tr.new("key repeated to every head", k.q, key.dtype, key)
        v = tr.new("value repeated to every head", k.q, v.dtype, v)
    attn = _sdpa(tr, k, q, key, v, act)
    o = _proj(tr, k, attn, "o", k.d, res, act)
    x = tr.new("residual after attention", k.d, res, x, o)
    h = _rms_norm(tr, k, x, res, "post-attention norm")
    gate = _proj(tr, k, h, "gate", k.f, res, act)
    up = _proj(tr, k, h, "up", k.f, res, act)
    if "activation" in k.fused:  # Liger LigerSiLUMulFunction: save_for_backward(a, b)
        if gate.grad or up.grad:
            tr.keep(gate, "activation", "fused SwiGLU keeps the gate projection")
            tr.keep(up, "activation", "fused SwiGLU keeps the up projection")
        m = tr.new("SwiGLU output", k.f, gate.dtype, gate, up)
    else:
        if gate.grad:
            tr.keep(gate, "activation", "silu keeps self")
        act_out = tr.new("silu(gate)", k.f, gate.dtype, gate)
        m = tr.mul(act_out, up, "silu(gate) * up", "activation")
    _proj(tr, k, m, "down", k.d, res, act)


def _gpt2_layer(tr: _Trace, k: LayerKey, x: T, res: int, act: int) -> None:
    """transformers GPT2Block: ln_1, c_attn (q, k, v in one matmul), SDPA, c_proj, dropout,
    ln_2, c_fc, gelu_new (tanh form in Python), c_proj, dropout."""
    h = _layer_norm(tr, k, x, "ln_1")
    qkv = _proj(tr, k, h, "qkv", 3 * k.q, res, act)
    third = T("q/k/v (views of one c_attn output)", k.q, qkv.dtype, qkv.grad)
    attn = _sdpa(tr, k, third, third, third, act)
    if attn.grad:  # q, k, v are views of one storage: SDPA keeps all of it
        tr.keep(qkv, "attention", "flash/SDPA keeps q, k, v: views of the c_attn output")
        tr.kept.pop(id(third), None)
        if k.kv_cache:  # k and v reach attention as the cache's copies (torch.cat), kept beside q's storage
            tr.keep(T("keys in the KV cache", k.q, qkv.dtype, True), "attention", "flash/SDPA keeps the cache's keys")
            tr.keep(T("values in the KV cache", k.q, qkv.dtype, True), "attention", "flash/SDPA keeps the cache's values")
    o = _dropout(tr, k, _proj(tr, k, attn, "o", k.d, res, act), "attention residual")
    x = tr.new("residual after attention", k.d, res, x, o)
    h = _layer_norm(tr, k, x, "ln_2")
    u = _proj(tr, k, h, "up", k.f, res, act)
    if u.grad:  # 0.5 * u * (1 + tanh(c * (u + 0.044715 * u ** 3)))
        tr.keep(u, "activation", "pow keeps self")
        for name in ("tanh result", "0.5 * u", "1 + tanh"):
            tr.keep(T(f"gelu_new {name}", k.f, u.dtype, True), "activation", "tanh keeps its result; mul keeps both factors")
    g = tr.new("gelu_new output", k.f, u.dtype, u)
    _dropout(tr, k, _proj(tr, k, g, "down", k.d, res, act), "MLP residual")


def _bert_layer(tr: _Trace, k: LayerKey, x: T, res: int, act: int) -> None:
    """transformers BertLayer (post-norm): q, k, v, SDPA, output dense, dropout, LayerNorm(x +),
    intermediate dense, GELU (F.gelu), output dense, dropout, LayerNorm(x +)."""
    q = _proj(tr, k, x, "q", k.q, res, act)
    key = _proj(tr, k, x, "k", k.q, res, act)
    v = _proj(tr, k, x, "v", k.q, res, act)
    attn = _sdpa(tr, k, q, key, v, act)
    o = _dropout(tr, k, _proj(tr, k, attn, "o", k.d, res, act), "attention output")
    x = _layer_norm(tr, k, tr.new("attention residual sum", k.d, res, x, o), "attention LayerNorm")
    u = _proj(tr, k, x, "up", k.f, res, act)
    if u.grad:
        tr.keep(u, "activation", "gelu keeps self")
    g = tr.new("gelu output", k.f, u.dtype, u)
    o = _dropout(tr, k, _proj(tr, k, g, "down", k.d, res, act), "MLP output")
    _layer_norm(tr, k, tr.new("MLP residual sum", k.d, res, x, o), "output LayerNorm")


# --- convolutional networks ---------------------------------------------------------------------

RESNET_STAGES = {18: ((2, 2, 2, 2), False), 34: ((3, 4, 6, 3), False), 50: ((3, 4, 6, 3), True),
                 101: ((3, 4, 23, 3), True), 152: ((3, 8, 36, 3), True)}  # fmt: skip
"""Blocks per stage and whether they are bottlenecks, by depth (torchvision/models/resnet.py
resnet18 ... resnet152: `_resnet(BasicBlock | Bottleneck, layers)`)."""


@dataclass(frozen=True, kw_only=True)
class ResNetLayout:
    """A ResNet as torchvision builds it (and perfmodel.measure.models.ResNet, which has the same
    layers): a 7x7/2 stem convolution, BatchNorm, ReLU, 3x3/2 max-pool, four stages of basic or
    bottleneck blocks (the stride in a stage's first block; in a bottleneck's 3x3 convolution,
    v1.5), global average pooling and one linear classifier."""

    stages: tuple[int, ...]
    bottleneck: bool
    width: int = 64
    """Channels of the stem and the first stage."""
    image: int = 224
    """Square input side in pixels."""
    classes: int = 1000

    def blocks(self) -> list[tuple[int, int, int, int]]:
        """(input channels, block width, stride, input side) of every block, in order."""
        out, cin, side = [], self.width, _pool_side(_conv_side(self.image, 7, 2, 3))
        expansion = 4 if self.bottleneck else 1
        for stage, count in enumerate(self.stages):
            width = self.width * 2**stage
            for i in range(count):
                stride = 2 if i == 0 and stage > 0 else 1
                out.append((cin, width, stride, side))
                side = _conv_side(side, 3, stride, 1)
                cin = width * expansion
        return out

    @property
    def features(self) -> int:
        """Channels into the classifier."""
        return self.width * 2 ** (len(self.stages) - 1) * (4 if self.bottleneck else 1)

    def convs(self) -> list[tuple[int, int, int, int, int]]:
        """(input channels, output channels, kernel, stride, input side) of every convolution, in
        order: the stem, each block's (1x1 / 3x3 / 1x1 for a bottleneck, two 3x3 for a basic block)
        and its strided 1x1 shortcut where the shape changes. A BatchNorm follows each."""
        out = [(3, self.width, 7, 2, self.image)]
        for cin, width, stride, side in self.blocks():
            if self.bottleneck:
                cout, after = 4 * width, _conv_side(side, 3, stride, 1)
                out += [(cin, width, 1, 1, side), (width, width, 3, stride, side), (width, cout, 1, 1, after)]
            else:
                cout = width
                out += [(cin, width, 3, stride, side), (width, width, 3, 1, _conv_side(side, 3, stride, 1))]
            if stride != 1 or cin != cout:
                out.append((cin, cout, 1, stride, side))
        return out

    def params_without_classifier(self) -> int:
        """Parameters of every convolution and BatchNorm (weight and bias); running statistics are
        buffers."""
        return sum(cin * cout * k * k + 2 * cout for cin, cout, k, _, _ in self.convs())

    def forward_flops(self) -> float:
        """Forward FLOPs per image of the convolutions and the classifier (2 per multiply-add, no
        biases: what torch.utils.flop_counter counts)."""
        convs = sum(
            2.0 * cin * cout * k * k * _conv_side(side, k, stride, k // 2) ** 2
            for cin, cout, k, stride, side in self.convs()
        )
        return convs + 2.0 * self.features * self.classes


def _conv_side(side: int, kernel: int, stride: int, padding: int) -> int:
    return (side + 2 * padding - kernel) // stride + 1


def _pool_side(side: int) -> int:
    """MaxPool2d(3, stride=2, padding=1)."""
    return _conv_side(side, 3, 2, 1)


SLICE_RESNET = re.compile(r"slice-resnet-(basic|bn)(\d+)-w(\d+)")
"""The collectors' ResNet slices (perfmodel.measure.configs.SliceConfig.model_name): block style,
blocks per stage, stem width."""


def resnet_layout(w: Workload) -> ResNetLayout | None:
    """The ResNet a CNN workload describes (None: not one this module can lay out): the depth from
    its name (resnet18 ... resnet152), the image side from `model.reference_input` ('224x224 ...',
    square), the number of classes from `model.params_total` (it must come out a whole number:
    otherwise the parameter count describes another network). A collectors' slice
    (slice-resnet-basic2222-w64, ...) names its blocks and width; its image side is the one whose
    forward FLOPs are the row's (`_slice_layout`)."""
    m = w.model
    if m.arch != "cnn" or m.family != "resnet":
        return None
    sliced = SLICE_RESNET.fullmatch(m.name.lower())
    if sliced:
        return _slice_layout(sliced.group(1), sliced.group(2), int(sliced.group(3)), int(m.params_total or 0),
                             float(m.forward_gflops_per_sample or 0.0))  # fmt: skip
    depth = re.fullmatch(r"resnet[-_]?(\d+)", m.name.lower())
    side = re.match(r"\s*(\d+)\s*x\s*(\d+)", m.reference_input or "224x224")
    if not depth or int(depth.group(1)) not in RESNET_STAGES or not side or side.group(1) != side.group(2):
        return None
    stages, bottleneck = RESNET_STAGES[int(depth.group(1))]
    layout = ResNetLayout(stages=stages, bottleneck=bottleneck, image=int(side.group(1)))
    head, rest = divmod((m.params_total or 0) - layout.params_without_classifier(), layout.features + 1)
    if rest or head < 1:
        return None
    return dataclasses.replace(layout, classes=head)


SLICE_FLOPS_TOLERANCE = 0.01
"""A slice's image side is accepted when its layout's forward FLOPs are the row's within this share."""


@functools.lru_cache(maxsize=256)
def _slice_layout(style: str, blocks: str, width: int, params: int, gflops: float) -> ResNetLayout | None:
    """The layout of a collectors' ResNet slice: classes from the parameter count (whole, as for a
    torchvision name), the square image side from 8 to 1024 px whose forward FLOPs are closest to
    the row's (within SLICE_FLOPS_TOLERANCE)."""
    layout = ResNetLayout(stages=tuple(int(d) for d in blocks), bottleneck=style == "bn", width=width)
    head, rest = divmod(params - layout.params_without_classifier(), layout.features + 1)
    if rest or head < 1 or gflops <= 0:
        return None
    err, side = min(
        (abs(dataclasses.replace(layout, classes=head, image=side).forward_flops() / (gflops * 1e9) - 1.0), -side)
        for side in range(8, 1025)
    )  # the closest; of equal ones (sides that stride to the same maps) the largest
    return dataclasses.replace(layout, classes=head, image=-side) if err <= SLICE_FLOPS_TOLERANCE else None


@dataclass(frozen=True, kw_only=True)
class ConvBlock:
    """One residual block of a ResNet, bytes per sample."""

    saved: float
    """What its forward keeps for backward, its output included, its input not (the previous
    block's output, counted there)."""
    input: float
    """Its input (what a checkpoint around it keeps)."""
    output: float
    params: int
    """Its parameters (convolutions and BatchNorm weights and biases)."""
    conv_weights: int
    """Its convolutions' weights (what autocast copies)."""


@dataclass(frozen=True, kw_only=True)
class ConvNet:
    """What a ResNet's forward keeps for backward, bytes per sample, by part."""

    stem: dict[str, float]
    """By kernel kind: the first convolution's input (its 16-bit copy under autocast; the images
    themselves are counted with the inputs), BatchNorm inputs, ReLU results, max-pool indices."""
    blocks: tuple[ConvBlock, ...]
    head: dict[str, float]
    """The classifier's input and the loss's log-probabilities."""
    images: float
    """The input images and labels, held by the caller through the step."""
    stem_weights: int
    """Parameters of the stem convolution."""
    conv_weights: int
    """Parameters of every convolution and the classifier (what autocast copies to 16-bit)."""
    largest_param: int
    """The largest single parameter tensor."""

    @property
    def saved(self) -> float:
        return sum(self.stem.values()) + sum(b.saved for b in self.blocks) + sum(self.head.values())

    def by_kernel(self) -> dict[str, float]:
        out = dict(self.stem)
        out["conv/norm/relu"] = out.get("conv/norm/relu", 0.0) + sum(b.saved for b in self.blocks)
        for k, v in self.head.items():
            out[k] = out.get(k, 0.0) + v
        return out


INDEX = 8
"""Bytes per max-pool index (int64)."""


def convnet(layout: ResNetLayout, precision: str) -> ConvNet:
    """What each part of `layout` keeps for backward in one training step, per sample, from the
    autograd definitions (PyTorch tools/autograd/derivatives.yaml):
      * convolution: `input` and `weight` (convolution_backward needs both; under autocast the
        16-bit copies of both: the input is already 16-bit after the first layer, the weight copy is
        cached once per step and counted once per model);
      * native_batch_norm (cudnn_batch_norm on CUDA): `input`, the weight and running statistics,
        and fp32 save_mean / save_invstd per channel (negligible); its output is not kept;
      * relu / relu_ (threshold_backward): `result`; the in-place stem ReLU keeps the BatchNorm
        output it overwrote, the out-of-place block ReLUs their new output (the same bytes);
      * max_pool2d_with_indices: `self` (the stem ReLU's result, already kept) and `indices`,
        int64 whatever the dtype: 8 bytes per output element;
      * adaptive_avg_pool2d to 1x1 runs `mean` (ATen AdaptiveAveragePooling.cpp), which keeps
        only sizes; addmm (the classifier): `mat1` (the pooled features) for the weight's gradient;
      * cross_entropy of `logits.float()`: _log_softmax keeps its fp32 `result`, nll_loss the
        same tensor and the labels.
    Activations are 4 bytes in fp32/tf32, 2 in bf16/fp16 and under autocast (convolutions run in
    16-bit there, batch_norm and relu are on neither autocast list and keep the 16-bit dtype)."""
    e = 4 if precision in ("fp32", "tf32") else 2
    amp = precision.startswith("amp")
    image_px = layout.image * layout.image
    pixel_bytes = 4 if precision in ("fp32", "tf32") or amp else 2
    side = _conv_side(layout.image, 7, 2, 3)
    stem_out = layout.width * side * side
    pooled = layout.width * _pool_side(side) ** 2
    stem = {
        # stem BatchNorm input, stem ReLU result (= max-pool input), max-pool output (the first
        # block's input: its convolutions keep it)
        "conv/norm/relu": 2.0 * stem_out * e + pooled * e,
        "max-pool indices": float(pooled * INDEX),
    }
    if amp:
        stem["autocast"] = 3.0 * image_px * 2  # the first convolution keeps the images' 16-bit copy
    blocks = []
    conv_weights, largest = 3 * layout.width * 49, 3 * layout.width * 49
    expansion = 4 if layout.bottleneck else 1
    for cin, width, stride, s_in in layout.blocks():
        s_out = _conv_side(s_in, 3, stride, 1)
        cout = width * expansion
        down = stride != 1 or cin != cout
        a_in, a_mid, a_out = s_in * s_in, s_out * s_out, s_out * s_out
        if layout.bottleneck:
            # conv1 (1x1) output -> bn1 input; relu1 result -> conv2 input; conv2 (3x3, stride)
            # output -> bn2; relu2 -> conv3; conv3 output -> bn3; shortcut conv output -> its BN;
            # the block's ReLU result (its output)
            elements = 2 * width * a_in + 2 * width * a_mid + cout * a_out + (cout * a_out if down else 0) + cout * a_out
            weights = cin * width + 9 * width * width + width * cout + (cin * cout if down else 0)
            largest = max(largest, 9 * width * width, cin * cout if down else 0, width * cout)
        else:
            # conv1 output -> bn1; relu1 -> conv2; conv2 output -> bn2; shortcut -> its BN; ReLU result
            elements = 4 * width * a_out + (cout * a_out if down else 0)
            weights = 9 * cin * width + 9 * width * width + (cin * cout if down else 0)
            largest = max(largest, 9 * width * width, 9 * cin * width)
        bn = 2 * (2 * width + cout) if layout.bottleneck else 4 * width
        params = weights + bn + (2 * cout if down else 0)
        conv_weights += weights
        blocks.append(ConvBlock(saved=float(elements * e), input=float(cin * a_in * e), output=float(cout * a_out * e),
                                params=params, conv_weights=weights))  # fmt: skip
    head = {"classifier": float(layout.features * e), "loss": float(layout.classes * FP32)}
    conv_weights += layout.features * layout.classes
    largest = max(largest, layout.features * layout.classes)
    return ConvNet(
        stem=stem, blocks=tuple(blocks), head=head, images=3.0 * image_px * pixel_bytes + 8, stem_weights=3 * layout.width * 49,
        conv_weights=conv_weights, largest_param=largest,
    )
