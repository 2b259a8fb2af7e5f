"""Real models built from dimensions in plain PyTorch (no downloads), for training slices.

- `LlamaDecoder`: RMSNorm, rotary position embeddings, SwiGLU MLP, grouped-query attention with
  F.scaled_dot_product_attention(is_causal=True), untied LM head (Llama 2 layout).
- `BertClassifier`: learned positions, post-LayerNorm blocks, GELU MLP, non-causal SDPA, pooler
  and classification head (BERT layout, no token-type embeddings).
- `ResNet`: ResNet-v1.5 style CNN (bottleneck or basic blocks) with a classification head.
- `TabularMLP`: Linear+ReLU stack for tabular classification (Ludwig's FC stack).

Every model has `loss(batch)`, `synthetic_batch(n, device, dtype)` and `blocks` (the units that
`activation_checkpointing = True` recomputes in backward with torch.utils.checkpoint).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from perfmodel.measure.configs import SliceConfig


class _Checkpointed(nn.Module):
    """Base: runs `self.blocks` with or without activation checkpointing."""

    activation_checkpointing: bool = False

    def _run_block(self, block: nn.Module, *args: Any) -> Any:
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, *args, use_reentrant=False)
        return block(*args)


# --- transformers ------------------------------------------------------------------------------


def rotary_tables(seq_len: int, head_dim: int, device: Any, dtype: torch.dtype, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of rotary embeddings (Su et al. 2021), half-rotation layout as in Llama/HF."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    t = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.attn_norm = nn.RMSNorm(d, eps=1e-5)
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d, bias=False)
        self.mlp_norm = nn.RMSNorm(d, eps=1e-5)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.kv_heads != self.heads:  # grouped-query attention: share each K/V head
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, -1))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaDecoder(_Checkpointed):
    def __init__(self, c: SliceConfig) -> None:
        super().__init__()
        d, heads = c.hidden_size or 0, c.num_heads or 1
        self.vocab_size = c.vocab_size or 0
        self.head_dim = d // heads
        self.embed_tokens = nn.Embedding(self.vocab_size, d)
        self.blocks = nn.ModuleList(
            LlamaBlock(d, heads, c.num_kv_heads or heads, c.ffn_hidden_size or 4 * d) for _ in range(c.num_layers or 0)
        )
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, self.vocab_size, bias=False)
        self.seq_len = c.seq_len or 0

    def embedding_params(self) -> int:
        return self.embed_tokens.weight.numel()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens)
        cos, sin = rotary_tables(tokens.shape[1], self.head_dim, tokens.device, x.dtype)
        for block in self.blocks:
            x = self._run_block(block, x, cos, sin)
        return self.lm_head(self.norm(x))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self(batch["tokens"])
        # Upcast logits for the loss, as Hugging Face's LlamaForCausalLM does.
        return F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten())

    def synthetic_batch(self, n: int, device: Any, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        g = torch.Generator(device="cpu").manual_seed(0)
        tokens = torch.randint(0, self.vocab_size, (n, self.seq_len + 1), generator=g)
        return {"tokens": tokens[:, :-1].to(device), "labels": tokens[:, 1:].to(device)}


class BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.o_proj = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.mlp_norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v)
        x = self.attn_norm(x + self.o_proj(a.transpose(1, 2).reshape(b, s, -1)))
        return self.mlp_norm(x + self.fc2(F.gelu(self.fc1(x))))


class BertClassifier(_Checkpointed):
    def __init__(self, c: SliceConfig) -> None:
        super().__init__()
        d = c.hidden_size or 0
        self.vocab_size = c.vocab_size or 0
        self.seq_len = c.seq_len or 0
        self.num_classes = c.num_classes or 2
        self.embed_tokens = nn.Embedding(self.vocab_size, d)
        self.embed_positions = nn.Embedding(max(self.seq_len, 512), d)
        self.embed_norm = nn.LayerNorm(d, eps=1e-12)
        self.blocks = nn.ModuleList(
            BertLayer(d, c.num_heads or 1, c.ffn_hidden_size or 4 * d) for _ in range(c.num_layers or 0)
        )
        self.pooler = nn.Linear(d, d)
        self.classifier = nn.Linear(d, self.num_classes)

    def embedding_params(self) -> int:
        return self.embed_tokens.weight.numel() + self.embed_positions.weight.numel()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed_norm(self.embed_tokens(tokens) + self.embed_positions(positions))
        for block in self.blocks:
            x = self._run_block(block, x)
        return self.classifier(torch.tanh(self.pooler(x[:, 0])))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(self(batch["tokens"]).float(), batch["labels"])

    def synthetic_batch(self, n: int, device: Any, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        g = torch.Generator(device="cpu").manual_seed(0)
        tokens = torch.randint(0, self.vocab_size, (n, self.seq_len), generator=g)
        labels = torch.randint(0, self.num_classes, (n,), generator=g)
        return {"tokens": tokens.to(device), "labels": labels.to(device)}


# --- CNN and MLP -------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.down(x))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, width, 1, stride=stride, bias=False), nn.BatchNorm2d(width))
            if stride != 1 or cin != width
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNet(_Checkpointed):
    def __init__(self, c: SliceConfig) -> None:
        super().__init__()
        width = c.cnn_width or 64
        block_cls = Bottleneck if c.cnn_bottleneck else BasicBlock
        self.image_size = c.image_size or 224
        self.num_classes = c.num_classes or 1000
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        cin = width
        for stage, count in enumerate(c.cnn_blocks or (2, 2, 2, 2)):
            w = width * 2**stage
            for i in range(count):
                blocks.append(block_cls(cin, w, 2 if (i == 0 and stage > 0) else 1))
                cin = w * block_cls.expansion
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(cin, self.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = self._run_block(block, x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(self(batch["images"]).float(), batch["labels"])

    def synthetic_batch(self, n: int, device: Any, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        g = torch.Generator(device="cpu").manual_seed(0)
        images = torch.randn(n, 3, self.image_size, self.image_size, generator=g)
        labels = torch.randint(0, self.num_classes, (n,), generator=g)
        return {"images": images.to(device=device, dtype=dtype), "labels": labels.to(device)}


class TabularMLP(_Checkpointed):
    def __init__(self, c: SliceConfig) -> None:
        super().__init__()
        width = c.hidden_size or 256
        self.in_features = c.in_features or 64
        self.num_classes = c.num_classes or 2
        dims = [self.in_features] + [width] * (c.num_layers or 2)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(a, b), nn.ReLU()) for a, b in zip(dims[:-1], dims[1:], strict=True)
        )
        self.head = nn.Linear(dims[-1], self.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = self._run_block(block, x)
        return self.head(x)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(self(batch["x"]).float(), batch["labels"])

    def synthetic_batch(self, n: int, device: Any, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        g = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(n, self.in_features, generator=g)
        labels = torch.randint(0, self.num_classes, (n,), generator=g)
        return {"x": x.to(device=device, dtype=dtype), "labels": labels.to(device)}


_BUILDERS: dict[str, type[nn.Module]] = {
    "llama": LlamaDecoder,
    "bert": BertClassifier,
    "resnet": ResNet,
    "mlp": TabularMLP,
}


def build_model(config: SliceConfig, device: Any = "cpu") -> nn.Module:
    """The model for a configuration, with parameters created directly on `device` (a 7B model
    is initialised on the GPU, never in host RAM). Always fp32; cast afterwards."""
    if config.kind not in _BUILDERS:
        raise ValueError(f"no torch model for kind {config.kind!r}")
    with torch.device(device):
        return _BUILDERS[config.kind](config)


# --- LoRA --------------------------------------------------------------------------------------


class LoRALinear(nn.Module):
    """y = W x + (alpha / r) * B A x with W frozen (Hu et al. 2021). B starts at zero."""

    def __init__(self, base: nn.Linear, r: int, alpha: float = 16.0) -> None:
        super().__init__()
        self.base = base
        base.weight.requires_grad_(False)
        if base.bias is not None:
            base.bias.requires_grad_(False)
        w = base.weight
        self.lora_a = nn.Parameter(torch.empty(r, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.scale = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


def apply_lora(model: nn.Module, r: int, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> int:
    """Freeze every parameter, then wrap the `targets` projections of each block with LoRA
    adapters (PEFT's default for Llama: q and v). A classifier head (BERT) stays trainable, as
    PEFT's sequence-classification task does. Returns the number of wrapped layers."""
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = 0
    for block in getattr(model, "blocks", []):
        for name in targets:
            layer = getattr(block, name, None)
            if isinstance(layer, nn.Linear):
                setattr(block, name, LoRALinear(layer, r))
                wrapped += 1
    for head in ("pooler", "classifier"):
        if hasattr(model, head):
            for p in getattr(model, head).parameters():
                p.requires_grad_(True)
    return wrapped


# --- analytic facts ----------------------------------------------------------------------------


def forward_gflops_per_sample(model: Any, device: Any, dtype: torch.dtype) -> float:
    """Forward FLOPs of one sample, counted with torch.utils.flop_counter.FlopCounterMode
    (matmuls and convolutions, 2 FLOPs per multiply-add)."""
    # torch: seconds to import, only measuring needs it
    from torch.utils.flop_counter import FlopCounterMode

    batch = model.synthetic_batch(2, device, dtype)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.loss(batch)
    return counter.get_total_flops() / 2 / 1e9


def activation_mb_per_sample(model: Any, device: Any, dtype: torch.dtype) -> float:
    """Memory of the tensors autograd saves for backward, per sample, in MB at 16-bit (2 bytes
    per element, the schema's convention), without recomputation. Found with
    torch.autograd.graph.saved_tensors_hooks on a 2-sample forward; parameters excluded."""
    params = {p.data_ptr() for p in model.parameters()}
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in params:
            key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            seen[key] = t.untyped_storage().nbytes() // max(t.element_size(), 1)
        return t

    was = getattr(model, "activation_checkpointing", False)
    model.activation_checkpointing = False
    try:
        batch = model.synthetic_batch(2, device, dtype)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model.loss(batch)
    finally:
        model.activation_checkpointing = was
    return sum(seen.values()) * 2 / 1e6 / 2
