"""Cost estimates for Ludwig ECD parts that are not catalog models: parameters, forward FLOPs and
activation elements per sample, from the layer sizes in the config or Ludwig's defaults.

Ludwig defaults used (ludwig/schema/encoders/*, ludwig/schema/combiners/*, and
ludwig/modules/convolutional_modules.py Conv2DStack): image stacked_cnn = two 3x3 'valid'
convolutions with 32 and 64 channels, each followed by a 2x2 max-pool, then one fully connected
layer of 128; text/sequence embed, parallel_cnn, stacked_cnn, rnn, transformer encoders with
embedding_size 256 and 256 filters / units; category dense encoder embedding_size 50; set/bag embed
50; concat combiner with no fully connected layers; tabnet size 32, output_size 128, num_steps 3,
4 GLU blocks (2 shared); ft_transformer (Ludwig 0.17's default combiner for >= 3 inputs) 1 layer,
hidden 256, 8 heads. Vocabulary sizes come from the data in Ludwig: perfmodel reads them from
--dataset (ludwig_data.py), else assumes ASSUMED_CATEGORY_VOCAB / ASSUMED_TEXT_VOCAB and says so.
With the data, every ECD model Ludwig built in issue 16's runs gets Ludwig's exact parameter count.

FLOPs count a multiply-add as 2. Activations are elements kept for backward (outputs of each
layer), converted to MB at 16 bits by the caller, as ModelSpec.activation_mb_per_sample asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfmodel.errors import ConfigError, UnsupportedError, quote

ASSUMED_CATEGORY_VOCAB = 1000
"""Distinct values per category / set / bag feature (Ludwig learns it from the data)."""
ASSUMED_TEXT_VOCAB = 20000
"""Vocabulary of Ludwig's own text tokenizers (preprocessing.most_common default 20000)."""

SEQUENCE_ENCODERS = ("embed", "parallel_cnn", "stacked_cnn", "rnn", "transformer", "passthrough")
SMALL_FEATURE_TYPES = ("number", "binary", "category", "set", "bag", "date", "h3", "vector")


@dataclass
class Cost:
    """Per-sample cost of a model part."""

    params: float = 0.0
    flops: float = 0.0
    """Forward FLOPs per sample."""
    acts: float = 0.0
    """Activation elements kept for backward per sample."""
    conv: bool = False
    recurrent: bool = False
    part: TransformerPart | None = None
    """The transformer stack inside this part (costed kernel by kernel by the step plan)."""
    extra_parts: int = 0
    """Further transformer stacks, costed by their FLOPs only (the model section holds one)."""

    def __iadd__(self, other: Cost) -> Cost:
        self.params += other.params
        self.flops += other.flops
        self.acts += other.acts
        self.conv = self.conv or other.conv
        self.recurrent = self.recurrent or other.recurrent
        parts = [p for p in (self.part, other.part) if p is not None]
        self.extra_parts += other.extra_parts + max(0, len(parts) - 1)
        self.part = max(parts, key=lambda p: p.flops_per_sample) if parts else None
        return self


@dataclass(frozen=True, kw_only=True)
class TransformerPart:
    """A Ludwig TransformerStack (ludwig/modules/attention_modules.py) as the native model section's
    part_* fields: what the step plan needs to cost it kernel by kernel."""

    layers: int
    tokens: int
    """Tokens per sample (FT-Transformer: input features + [CLS]; a sequence encoder: its padded length)."""
    hidden_size: int
    num_heads: int
    ffn_size: int
    """transformer_output_size: the feed-forward's inner width."""
    inputs: int = 0
    """Per-sample input projections (FT-Transformer: one Linear per input feature)."""
    input_width: float = 0.0
    """Their mean input width."""
    vocab_size: int = 0
    """Token-embedding rows before the stack (a sequence encoder), 0 = none."""
    flops_per_sample: float = 0.0
    """Forward FLOPs of the stack and its projections per sample (to pick the larger of two)."""

    def model_fields(self) -> dict[str, Any]:
        return {
            "part_layers": self.layers,
            "part_tokens": self.tokens,
            "part_hidden_size": self.hidden_size,
            "part_num_heads": self.num_heads,
            "part_ffn_size": self.ffn_size,
            "part_inputs": self.inputs,
            "part_input_width": float(f"{self.input_width:.6g}"),
            "part_vocab_size": self.vocab_size,
        }


def linear(n_in: float, n_out: float, tokens: float = 1.0) -> Cost:
    return Cost(params=n_in * n_out + n_out, flops=2 * n_in * n_out * tokens, acts=n_out * tokens)


MAX_LAYERS = 10_000
"""Most layers one Ludwig stack may declare (a typo like 1e9 must not build a billion-entry list)."""


def layer_count(value: Any, key: str) -> int:
    """A layer count from a Ludwig config: a whole number between 0 and MAX_LAYERS."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or not 0 <= value <= MAX_LAYERS
    ):
        raise ConfigError(f"{key} must be a whole number between 0 and {MAX_LAYERS:,}, got {quote(value)}")
    return int(value)


def fc_widths(p: Mapping[str, Any], default: list[int], default_size: int = 256) -> list[int]:
    """Output sizes of a Ludwig fully connected stack (fc_layers, or num_fc_layers x output_size)."""
    size = int(p.get("output_size") or default_size)
    if isinstance(p.get("fc_layers"), list):
        return [
            int(layer.get("output_size", size)) if isinstance(layer, dict) else size
            for layer in p["fc_layers"]
        ]
    if p.get("num_fc_layers") is not None:
        return [size] * layer_count(p["num_fc_layers"], "num_fc_layers")
    return list(default)


def fc_stack(width: float, widths: list[int]) -> tuple[Cost, float]:
    cost = Cost()
    for out in widths:
        cost += linear(width, out)
        width = out
    return cost, width


def _out(size: int, k: int, stride: int, pad: int) -> int:
    return max(1, (size + 2 * pad - k) // stride + 1)


def conv2d(
    h: int, w: int, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0
) -> tuple[Cost, int, int]:
    h2, w2 = _out(h, k, stride, pad), _out(w, k, stride, pad)
    cost = Cost(
        params=k * k * cin * cout + cout,
        flops=2.0 * k * k * cin * cout * h2 * w2,
        acts=2.0 * cout * h2 * w2,
        conv=True,
    )
    return cost, h2, w2


def image_stacked_cnn(p: Mapping[str, Any], h: int, w: int, c: int) -> tuple[Cost, float]:
    """Ludwig's image stacked_cnn encoder (new keys out_channels/kernel_size/pool_kernel_size or
    legacy num_filters/filter_size/pool_size)."""
    layers = p.get("conv_layers")
    if not isinstance(layers, list):
        n = p.get("num_conv_layers")
        layers = (
            [{} for _ in range(layer_count(n, "num_conv_layers"))]
            if n
            else [{"out_channels": 32}, {"out_channels": 64}]
        )
    default_out = int(p.get("out_channels") or p.get("num_filters") or 256)
    cost = Cost()
    for layer in layers:
        layer = layer if isinstance(layer, dict) else {}
        cout = int(layer.get("out_channels") or layer.get("num_filters") or default_out)
        k = int(layer.get("kernel_size") or layer.get("filter_size") or p.get("kernel_size") or 3)
        stride = int(layer.get("stride") or 1)
        padding = layer.get("padding", p.get("padding", "valid"))
        pad = k // 2 if padding == "same" else (int(padding) if isinstance(padding, int) else 0)
        part, h, w = conv2d(h, w, c, cout, k, stride, pad)
        cost += part
        pool = layer.get("pool_kernel_size", layer.get("pool_size", 2))
        if pool:
            ps = int(layer.get("pool_stride") or layer.get("pool_strides") or pool)
            h, w = _out(h, int(pool), ps, 0), _out(w, int(pool), ps, 0)
            cost.acts += cout * h * w
        c = cout
    fc, width = fc_stack(float(c * h * w), fc_widths(p, [128], 128))
    cost += fc
    return cost, width


def unet(h: int, w: int, cin: int, num_classes: int) -> Cost:
    """Ludwig's UNet encoder + decoder: 4 levels of two 3x3 convolutions (64..512 channels), a 1024
    bottleneck, 2x2 transposed-convolution upsampling and a 1x1 classifier (Ronneberger et al. 2015
    with 'same' padding)."""
    cost = Cost()
    channels = [64, 128, 256, 512]
    prev = cin
    for i, ch in enumerate(channels):
        hi, wi = h >> i, w >> i
        cost += conv2d(hi, wi, prev, ch, 3, 1, 1)[0]
        cost += conv2d(hi, wi, ch, ch, 3, 1, 1)[0]
        prev = ch
    hb, wb = h >> 4, w >> 4
    cost += conv2d(hb, wb, 512, 1024, 3, 1, 1)[0]
    cost += conv2d(hb, wb, 1024, 1024, 3, 1, 1)[0]
    prev = 1024
    for i, ch in reversed(list(enumerate(channels))):
        hi, wi = h >> i, w >> i
        cost += Cost(
            params=4 * prev * ch + ch,
            flops=2.0 * 4 * prev * ch * (hi // 2) * (wi // 2),
            acts=ch * hi * wi,
            conv=True,
        )
        cost += conv2d(hi, wi, 2 * ch, ch, 3, 1, 1)[0]
        cost += conv2d(hi, wi, ch, ch, 3, 1, 1)[0]
        prev = ch
    cost += conv2d(h, w, 64, num_classes, 1)[0]
    return cost


def sequence_encoder(
    kind: str, p: Mapping[str, Any], seq: int, vocab: int = ASSUMED_TEXT_VOCAB
) -> tuple[Cost, float]:
    """Ludwig's own text / sequence encoders (no pretrained weights)."""
    if kind not in SEQUENCE_ENCODERS:
        raise UnsupportedError(f"sequence encoder {quote(kind)}")
    if kind == "passthrough":
        return Cost(acts=seq), float(seq)
    emb = int(p.get("embedding_size") or 256)
    cost = Cost(params=vocab * emb, acts=seq * emb)
    if kind == "embed":
        cost.flops += seq * emb
        return cost, float(emb)
    if kind == "rnn":
        state = int(p.get("state_size") or 256)
        gates = {"lstm": 4, "gru": 3}.get(str(p.get("cell_type", "rnn")).lower(), 1)
        dirs = 2 if p.get("bidirectional") else 1
        width = float(emb)
        for _ in range(layer_count(p.get("num_layers") or 1, "num_layers")):
            per_token = (
                gates * (width + state + 2) * state
            )  # torch RNNs: input and hidden weights, two biases
            cost += Cost(
                params=dirs * per_token,
                flops=2.0 * dirs * per_token * seq,
                acts=dirs * state * seq * gates,
                recurrent=True,
            )
            width = float(dirs * state)
        return cost, width
    if kind == "transformer":
        d = int(p.get("hidden_size") or 256)
        cost += Cost(params=seq * emb)  # learned position embeddings, one per padded position
        cost += linear(emb, d, seq) if emb != d else Cost()
        layers = layer_count(p.get("num_layers") or 1, "num_layers")
        ff = int(p.get("transformer_output_size") or 256)
        part, width = transformer_stack(d, ff, layers, seq)
        cost += part
        cost.part = TransformerPart(
            layers=layers,
            tokens=int(seq),
            hidden_size=d,
            num_heads=int(p.get("num_heads") or 8),
            ffn_size=ff,
            vocab_size=int(vocab) if emb == d else 0,
            flops_per_sample=part.flops,
        )
        return cost, width
    nf = int(p.get("num_filters") or 256)
    if kind == "parallel_cnn":
        sizes = (
            [int(x.get("filter_size", 3)) for x in p["conv_layers"]]
            if isinstance(p.get("conv_layers"), list)
            else [2, 3, 4, 5]
        )
        for k in sizes:
            cost += Cost(params=k * emb * nf + nf, flops=2.0 * k * emb * nf * seq, acts=nf * seq, conv=True)
        width = float(nf * len(sizes))
    else:  # stacked_cnn: filter sizes 7,7,3,3,3,3 with max-pool 3 after layers 1, 2 and 6
        plan = [(7, 3), (7, 3), (3, 0), (3, 0), (3, 0), (3, 3)]
        if isinstance(p.get("conv_layers"), list):
            plan = [(int(x.get("filter_size", 3)), int(x.get("pool_size") or 0)) for x in p["conv_layers"]]
        cin, length = emb, float(seq)
        for k, pool in plan:
            cost += Cost(
                params=k * cin * nf + nf, flops=2.0 * k * cin * nf * length, acts=nf * length, conv=True
            )
            cin = nf
            if pool:
                length = max(1.0, length // pool)
        width = float(nf)
    fc, width = fc_stack(width, fc_widths(p, [512, 256]))
    cost += fc
    return cost, width


def transformer_stack(d: int, ff: int, layers: int, seq: float) -> tuple[Cost, float]:
    """Ludwig's TransformerStack (ludwig/modules/attention_modules.py): per layer multi-head attention
    (q, k, v, output projections with biases), a two-layer feed-forward of width `ff` and two layer
    norms, over `seq` tokens; attention scores and values 4 x seq^2 x d FLOPs per layer."""
    per_layer = 4 * (d * d + d) + (d * ff + ff) + (ff * d + d) + 4 * d
    matmul = 4 * d * d + 2 * d * ff
    return Cost(
        params=layers * per_layer,
        flops=layers * (2.0 * matmul * seq + 4.0 * seq * seq * d),
        acts=layers * seq * (6 * d + ff),
    ), float(d)


def ft_transformer(widths: list[float], p: Mapping[str, Any]) -> tuple[Cost, float]:
    """Ludwig's ft_transformer combiner (Gorishniy et al. 2021): each input feature projected to
    hidden_size (a linear layer per feature), a learned [CLS] token, a TransformerStack over
    features + 1 tokens, the [CLS] output through fc_layers (none by default). Ludwig 0.17's
    default when an ECD config with >= 3 inputs has no combiner section (1 layer, hidden 256,
    8 heads, transformer_output_size 256)."""
    d = int(p.get("hidden_size") or 256)
    cost = Cost(params=d)  # [CLS]
    for w in widths:
        cost += linear(max(w, 1.0), d)
    layers = layer_count(p.get("num_layers") or 1, "num_layers")
    ff = int(p.get("transformer_output_size") or 256)
    part, width = transformer_stack(d, ff, layers, len(widths) + 1)
    projections = cost.flops
    cost += part
    cost.part = TransformerPart(
        layers=layers,
        tokens=len(widths) + 1,
        hidden_size=d,
        num_heads=int(p.get("num_heads") or 8),
        ffn_size=ff,
        inputs=len(widths),
        input_width=sum(max(w, 1.0) for w in widths) / max(len(widths), 1),
        flops_per_sample=part.flops + projections,
    )
    fc, width = fc_stack(width, fc_widths(p, [], int(p.get("output_size") or 256)))
    cost += fc
    return cost, width


def small_feature(ftype: str, kind: str, p: Mapping[str, Any], vocab: int | None = None) -> tuple[Cost, float]:
    """Tabular-style input features: (cost, output width). `vocab`: a category / set / bag
    feature's distinct values (from the data; default ASSUMED_CATEGORY_VOCAB). A dense category
    embedding has min(vocab, embedding_size) dimensions (ludwig/modules/embedding_modules.py)."""
    vocab = int(vocab or ASSUMED_CATEGORY_VOCAB)
    if ftype in ("number", "binary"):
        if kind == "dense":
            return fc_stack(1.0, fc_widths(p, [int(p.get("output_size") or 256)]))
        return Cost(acts=1), 1.0
    if ftype in ("category", "set", "bag"):
        if kind in ("sparse", "onehot"):
            return Cost(acts=vocab), float(vocab)
        emb = int(p.get("embedding_size") or 50)
        emb = min(emb, vocab) if ftype == "category" else emb
        return Cost(params=vocab * emb, flops=emb, acts=emb), float(emb)
    if ftype in ("date", "h3"):
        emb = int(p.get("embedding_size") or 10)
        parts = 9 if ftype == "date" else 19
        cost, width = fc_stack(float(parts * emb), fc_widths(p, [10], 10))
        cost += Cost(params=parts * 100 * emb, acts=parts * emb)
        return cost, width
    if ftype == "vector":
        return fc_stack(64.0, fc_widths(p, [int(p.get("output_size") or 256)]))
    raise UnsupportedError(f"input feature type {quote(ftype)}")


def tabnet(width: float, p: Mapping[str, Any]) -> tuple[Cost, float]:
    """TabNet combiner (Arik & Pfister 2019): per step a feature transformer of GLU blocks and an
    attentive transformer; Ludwig defaults size (N_a) 32, output_size (N_d) 128, num_steps 3."""
    na, nd = int(p.get("size") or 32), int(p.get("output_size") or 128)
    steps = int(p.get("num_steps") or 3)
    total, shared = int(p.get("num_total_blocks") or 4), int(p.get("num_shared_blocks") or 2)
    h = na + nd
    first, rest = width * 2 * h, h * 2 * h
    per_transformer_flops = 2 * (first + (total - 1) * rest)
    params = first + (shared - 1) * rest + (steps + 1) * (total - shared) * rest + steps * na * width
    flops = (steps + 1) * per_transformer_flops + steps * 2 * na * width
    acts = (steps + 1) * total * 2 * h + steps * 2 * width
    return Cost(params=params, flops=flops, acts=acts), float(nd)
