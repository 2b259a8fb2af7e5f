"""Ludwig ECD (encoder-combiner-decoder) models -> the native `model` section.

A pretrained transformer encoder (bert, roberta, auto_transformer, vit, ...) becomes the catalog
model it loads; a torchvision resnet becomes the catalog resnet scaled to the image size, a timm
encoder (timm, caformer, convformer, poolformer) its row of perfmodel's timm table scaled the same
way, and another torchvision encoder (efficientnet, convnext, regnet, ...) the timm row of the same
architecture at the crop its weights resize to; any other model is estimated part by part (ludwig_estimates.py) and given as params_total /
forward_gflops_per_sample / activation_mb_per_sample. Anything perfmodel cannot cost raises
UnsupportedError naming the part and what is supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_model
from perfmodel.catalog.models import TIMM_PREFIX, timm_model
from perfmodel.config import ludwig_estimates as est
from perfmodel.config.ludwig_data import LudwigData
from perfmodel.config.ludwig_defaults import LudwigDefaults
from perfmodel.config.ludwig_features import LudwigConfig, LudwigFeature
from perfmodel.config.native import Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote
from perfmodel.workload import ModelSpec

HF_TEXT_ENCODERS = {
    "bert": "bert-base-uncased",
    "distilbert": "distilbert-base-uncased",
    "roberta": "roberta-base",
    "t5": "t5-small",
    "mt5": "google/mt5-base",
    "gpt2": "gpt2",
    "gpt": "openai-gpt",
    "albert": "albert-base-v2",
    "xlmroberta": "xlm-roberta-base",
    "electra": "google/electra-small-discriminator",
    "camembert": "camembert-base",
    "longformer": "allenai/longformer-base-4096",
    "xlnet": "xlnet-base-cased",
    "flaubert": "flaubert/flaubert_small_cased",
    "ctrl": "ctrl",
    "transformer_xl": "transfo-xl-wt103",
    "xlm": "xlm-mlm-en-2048",
    "deberta": "microsoft/deberta-v3-base",
    "auto_transformer": "",
    "llm": "",
}
"""Ludwig text encoder -> its default pretrained_model_name_or_path (ludwig/schema/encoders/text_encoders.py)."""
TIMM_ENCODERS = {"timm": "caformer_s18", "caformer": "caformer_s18", "convformer": "convformer_s18",
                 "poolformer": "poolformerv2_s12"}  # fmt: skip
"""Ludwig's timm image encoders -> their default model_name (ludwig/schema/encoders/image/timm.py:
`timm` takes any timm model; the MetaFormer aliases a curated list)."""
TORCHVISION_TIMM: dict[tuple[str, str], tuple[str, int]] = {
    **{("convnext", v): (f"convnext_{v}", 224) for v in ("tiny", "small", "base", "large")},
    **{("densenet", v): (f"densenet{v}", 224) for v in ("121", "161", "169", "201")},
    ("efficientnet", "b0"): ("efficientnet_b0", 224),
    **{("efficientnet", f"b{n}"): (f"tf_efficientnet_b{n}", c)
       for n, c in ((1, 240), (2, 288), (3, 300), (4, 380), (5, 456), (6, 528), (7, 600))},  # fmt: skip
    **{("efficientnet", f"v2_{v}"): (f"tf_efficientnetv2_{v}", c) for v, c in (("s", 384), ("m", 480), ("l", 480))},
    ("inceptionv3", "base"): ("inception_v3", 299),
    **{("mnasnet", v): (f"mnasnet_{t}", 224) for v, t in (("0_5", "050"), ("0_75", "075"), ("1_0", "100"))},
    ("mobilenetv2", "base"): ("mobilenetv2_100", 224),
    **{("mobilenetv3", v): (f"mobilenetv3_{v}_100", 224) for v in ("small", "large")},
    **{("regnet", f"{k}_{v}"): (f"regnet{k}_{t}", 224) for k in ("x", "y")
       for v, t in (("400mf", "004"), ("800mf", "008"), ("1_6gf", "016"), ("3_2gf", "032"), ("8gf", "080"),
                    ("16gf", "160"), ("32gf", "320"))},  # fmt: skip
    **{("resnext", v): (f"resnext{v}", 224) for v in ("50_32x4d", "101_32x8d", "101_64x4d")},
    **{("swin_transformer", v): (f"swin_{n}_patch4_window7_224", 224) for v, n in (("t", "tiny"), ("s", "small"),
                                                                                   ("b", "base"))},  # fmt: skip
    **{("vgg", v): (f"vgg{v}", 224) for v in ("11", "13", "16", "19", "11_bn", "13_bn", "16_bn", "19_bn")},
    **{("wide_resnet", v): (f"wide_resnet{v}", 224) for v in ("50_2", "101_2")},
}
"""Ludwig's torchvision image encoders (ludwig/schema/encoders/image/torchvision.py: type and
model_variant) -> (the timm model of the same architecture in perfmodel's timm table, the crop side
torchvision's pretrained weights resize to: 224 but EfficientNet B1-B7 240-600 and V2 384/480,
Inception v3 299). EfficientNet B1-B7 and V2 are the TensorFlow ports (tf_*: torchvision's follow the
TF architectures); MNASNet 1.3, RegNet Y 128GF, AlexNet, GoogLeNet, MaxViT, ShuffleNet V2 and
SqueezeNet have no twin in the table."""
TORCHVISION_DEFAULTS = {"convnext": "base", "densenet": "121", "efficientnet": "b0", "inceptionv3": "base",
                        "mnasnet": "0_5", "mobilenetv2": "base", "mobilenetv3": "small", "regnet": "x_1_6gf",
                        "resnext": "50_32x4d", "swin_transformer": "t", "vgg": "11", "wide_resnet": "50_2"}  # fmt: skip
"""Each torchvision encoder's default model_variant (the same schema file)."""
IMAGE_ENCODERS = ("stacked_cnn", "resnet", "vit", "unet", *TIMM_ENCODERS, *TORCHVISION_DEFAULTS)
_HF_DIMS = {
    "hidden_size": "hidden_size",
    "d_model": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "num_heads": "num_heads",
    "intermediate_size": "ffn_hidden_size",
    "d_ff": "ffn_hidden_size",
    "vocab_size": "vocab_size",
}
TEXT_DEFAULT_MAX_LEN = 256
"""Ludwig text preprocessing max_sequence_length default."""


@dataclass
class Candidate:
    """A pretrained model that carries the cost of an ECD model."""

    label: str
    model: dict[str, Any]
    seq_len: int | None = None
    seq_line: str | None = None
    seq_is_default: bool = False
    """True when seq_len is Ludwig's default cap (an assumption), not read from the config or data."""
    trainable: bool = True
    trainable_line: str | None = None
    adapter: Any = None
    checkpointing: bool | None = None


def _text_candidate(f: LudwigFeature, stats: Any) -> Candidate:
    path, kind, p, own, pre = f.where, f.encoder, f.encoder_params, f.encoder_given, f.preprocessing
    name = p.get("base_model") if kind == "llm" else p.get("pretrained_model_name_or_path")
    name = name or HF_TEXT_ENCODERS[kind]
    if not name:
        key = "base_model" if kind == "llm" else "pretrained_model_name_or_path"
        raise ConfigError(f"{path}: encoder {kind} needs {key} (a catalog name or Hugging Face id)")
    model: dict[str, Any] = {"name": str(name)}
    for key, dim in _HF_DIMS.items():
        if key in own and p.get(key) is not None:
            model[dim] = p[key]
    cap = p.get("max_sequence_length") or pre.get("max_sequence_length")
    c = Candidate(label=f"{path}: {kind} encoder ({name})", model=model, adapter=p.get("adapter"))
    if stats is not None and f.column in stats.text_columns:
        longest = stats.max_tokens(f.column) + 2
        c.seq_len = max(1, min(int(cap or TEXT_DEFAULT_MAX_LEN), longest))
        c.seq_line = (
            f"{path}: sequence length {c.seq_len} = longest text in column {f.column} "
            f"(~{longest} tokens by characters/4, with 2 special tokens) capped at max_sequence_length "
            f"{cap or TEXT_DEFAULT_MAX_LEN}"
        )
    elif cap:
        c.seq_len = int(cap)
    else:
        c.seq_len, c.seq_is_default = TEXT_DEFAULT_MAX_LEN, True
        c.seq_line = (
            f"{path}: max_sequence_length not given: Ludwig's default {TEXT_DEFAULT_MAX_LEN} assumed as the "
            f"sequence length (an upper bound: Ludwig pads to the longest text in the data; pass --dataset)"
        )
    c.trainable = bool(p.get("trainable", False))
    if "trainable" not in own:
        c.trainable_line = (
            f"{path}: encoder trainable not given: Ludwig's default for pretrained {kind} encoders is "
            f"false (frozen encoder, forward pass only)"
        )
    if p.get("gradient_checkpointing") is not None:
        c.checkpointing = bool(p["gradient_checkpointing"])
    return c


def _probe_image(dataset: Path | None, f: LudwigFeature) -> tuple[int, int, int] | None:
    if dataset is None:
        return None
    try:
        from PIL import Image

        from perfmodel.config.dataset_size import first_value

        value = first_value(dataset, f.column)
        if value is None:
            return None
        path = Path(str(value))
        path = path if path.is_absolute() else dataset.parent / path
        if not path.is_file():  # a FIFO or device would block Image.open
            return None
        with Image.open(path) as img:
            return img.height, img.width, len(img.getbands())
    except Exception:  # no PIL, not a path, unreadable image: fall back to the assumption
        return None


def image_size(f: LudwigFeature, dataset: Path | None, default: int, notes: list[str]) -> tuple[int, int, int]:
    """(height, width, channels) of an image input: its preprocessing or encoder, else the
    dataset's first image, else `default` (stated in `notes`)."""
    path, p, pre = f.where, f.encoder_params, f.ludwig_preprocessing
    h = pre.get("height") or p.get("img_height") or p.get("height")
    w = pre.get("width") or p.get("img_width") or p.get("width") or h
    c = pre.get("num_channels") or p.get("in_channels") or p.get("num_channels")
    if h and w and c:
        return int(h), int(w), int(c)
    probed = _probe_image(dataset, f)
    if probed is not None and not (h and w):
        h = min(probed[0], int(pre.get("infer_image_max_height") or probed[0]))
        w = min(probed[1], int(pre.get("infer_image_max_width") or probed[1]))
        c = c or probed[2]
        notes.append(f"{path}: image size {h}x{w}x{c} read from the first image of the dataset")
        return int(h), int(w), int(c)
    h = int(h or pre.get("infer_image_max_height") or default)
    w = int(w or pre.get("infer_image_max_width") or default)
    c = int(c or (probed[2] if probed else 3))
    notes.append(
        f"{path}: image size not given (Ludwig infers it from the images): assumed {h}x{w}x{c}; "
        f"add preprocessing height/width/num_channels to the feature to change it"
    )
    return h, w, c


def _vit(f: LudwigFeature, h: int, w: int) -> Candidate:
    p = f.encoder_params
    patch = int(p.get("patch_size") or 16)
    tokens = (h // patch) * (w // patch) + 1
    d, layers = int(p.get("hidden_size") or 768), int(p.get("num_hidden_layers") or 12)
    heads, ffn = int(p.get("num_attention_heads") or 12), int(p.get("intermediate_size") or 3072)
    standard = (d, layers, heads, ffn, patch) == (768, 12, 12, 3072, 16)
    model = {
        "name": "vit-b16" if standard else "ludwig-vit",
        "family": "vit",
        "arch": "encoder",
        "hidden_size": d,
        "num_layers": layers,
        "num_heads": heads,
        "ffn_hidden_size": ffn,
        "vocab_size": 0,
        "learned_pos_embeddings": tokens,
        "reference_input": f"{h}x{w} image, {patch}x{patch} patches",
    }
    return Candidate(
        label=f"{f.where}: vit encoder",
        model=model,
        seq_len=tokens,
        seq_line=f"{f.where}: vit sequence length {tokens} = ({h}/{patch}) x ({w}/{patch}) patches + [CLS]",
        trainable=bool(p.get("trainable", True)),
    )


def _resnet(f: LudwigFeature, h: int, w: int) -> Candidate:
    p = f.encoder_params
    size = int(p.get("model_variant") or p.get("resnet_size") or 50)
    base = get_model(f"resnet{size}")
    return Candidate(
        label=f"{f.where}: resnet{size} encoder",
        model=_at_image_size(base, 224, h, w),
        trainable=bool(p.get("trainable", True)),
    )


def _at_image_size(spec: ModelSpec, side: int, h: int, w: int) -> dict[str, Any]:
    """The model section of `spec`, whose numbers are for side x side images, at h x w: FLOPs, saved
    activations and the convolutions' traffic grow with the pixels, the attentions' scores and FLOPs
    with their square (global attention; a windowed one grows with the pixels, so the estimate errs
    slow there); layer counts stay."""
    factor = h * w / (side * side)
    model: dict[str, Any] = {"name": spec.name, "reference_input": f"{h}x{w} image"}
    if abs(factor - 1) <= 1e-9:
        return model
    attention = spec.attention_gflops_per_sample
    model["forward_gflops_per_sample"] = (float(spec.forward_gflops_per_sample or 0) - attention) * factor + (
        attention * factor * factor
    )
    if spec.activation_mb_per_sample:
        model["activation_mb_per_sample"] = spec.activation_mb_per_sample * factor
    for key in ("depthwise_gflops_per_sample", "depthwise_melements_per_sample", "grouped_gflops_per_sample",
                "grouped_melements_per_sample"):  # fmt: skip
        if getattr(spec, key):
            model[key] = getattr(spec, key) * factor
    if attention:
        model["attention_gflops_per_sample"] = attention * factor * factor
        model["attention_mscores_per_sample"] = spec.attention_mscores_per_sample * factor * factor
    return model


def _timm(f: LudwigFeature, dataset: Path | None, notes: list[str], default: str) -> Candidate:
    """A timm encoder (Ludwig's TimmEncoder: timm.create_model(model_name, num_classes=0)) at this
    feature's image size (`_scaled_timm`)."""
    spec, side = timm_model(str(f.encoder_params.get("model_name") or default))
    h, w, _ = image_size(f, dataset, side, notes)
    return _scaled_timm(f, spec, side, h, w, notes)


def _torchvision(f: LudwigFeature, notes: list[str]) -> Candidate:
    """A torchvision encoder of Ludwig's (TV*Encoder: torchvision's pretrained model, its images
    resized to the weights' crop size by the weights' own transform, image_feature.py
    _get_torchvision_transform) as the timm model of the same architecture (`TORCHVISION_TIMM`) at
    that crop size."""
    p = f.encoder_params
    kind = f.encoder
    variant = str(p.get("model_variant") if p.get("model_variant") is not None else TORCHVISION_DEFAULTS[kind])
    found = TORCHVISION_TIMM.get((kind, variant))
    if found is None:
        known = sorted(v for k, v in TORCHVISION_TIMM if k == kind)
        raise UnsupportedError(
            f"{f.where}: {kind} model_variant {quote(variant)} has no timm twin in perfmodel's timm table; "
            f"supported: {', '.join(known)}"
        )
    name, crop = found
    spec, side = timm_model(name)
    notes.append(
        f"{f.where}: torchvision {kind} {variant} costed as timm {name} (the same architecture) at {crop}x{crop}, "
        "the crop its pretrained weights' transform resizes to"
    )
    return _scaled_timm(f, spec, side, crop, crop, notes)


def _scaled_timm(f: LudwigFeature, spec: ModelSpec, side: int, h: int, w: int, notes: list[str]) -> Candidate:
    """A row of perfmodel's timm table at h x w (`_at_image_size`), the scaling stated in `notes`."""
    p = f.encoder_params
    model = _at_image_size(spec, side, h, w)
    if "forward_gflops_per_sample" in model:
        factor = h * w / (side * side)
        attention = spec.attention_gflops_per_sample
        notes.append(
            f"{f.where}: timm {spec.name[len(TIMM_PREFIX) :]} costed at {h}x{w} from its numbers at {side}x{side} "
            f"(FLOPs and activations x{factor:.3g} with the pixels"
            + (", its attentions' scores with their square" if attention else "")
            + ")"
        )
    return Candidate(label=f"{f.where}: timm {spec.name[len(TIMM_PREFIX) :]} encoder", model=model,
                     trainable=bool(p.get("trainable", True)))  # fmt: skip


def ludwig_columns(config: LudwigConfig) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
    """({category column: most_common}, {text column: (tokenizer, most_common)}) that Ludwig learns
    vocabularies from: category inputs and outputs, text/sequence inputs with Ludwig's own encoders."""
    cats: dict[str, int] = {}
    texts: dict[str, tuple[str, int]] = {}
    for f in (*config.inputs, *config.outputs):
        pre = f.ludwig_preprocessing
        if f.type == "category":
            cats[f.column] = int(pre.get("most_common") or 10000)
        elif f.type in ("text", "sequence") and not f.output and f.encoder not in HF_TEXT_ENCODERS:
            texts[f.column] = (
                str(pre.get("tokenizer") or "space_punct"),
                int(pre.get("most_common") or 20000),
            )
    return cats, texts


_SIZE_KEYS = (
    "embedding_size",
    "num_filters",
    "output_size",
    "state_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "transformer_output_size",
    "num_fc_layers",
    "cell_type",
    "bidirectional",
)
"""Encoder settings that change the cost: the ones an assumption line names when Ludwig's default is used."""


def _note_encoder_defaults(draft: Draft, f: LudwigFeature, defaults: LudwigDefaults) -> None:
    """State the encoder Ludwig picks and the default sizes it uses (when the config does not say)."""
    where, ftype, kind, p, own = f.where, f.type, f.encoder, f.encoder_params, f.encoder_given
    sized = {k: p[k] for k in _SIZE_KEYS if k in p and k not in own and p[k] is not None}
    if "type" in own and not sized:
        return
    which = kind if "type" in own else f"{kind} (Ludwig's default for {ftype})"
    if not sized and kind == "passthrough":
        return
    sizes = ", ".join(f"{k} {v}" for k, v in sized.items())
    draft.note(f"{where}: encoder {which}{' with ' + sizes if sizes else ''} [{defaults.source}]")


def _vocab_from_config(p: Mapping[str, Any]) -> int | None:
    """The vocabulary Ludwig wrote into an encoder after preprocessing (vocab_size, or its vocab list)."""
    if isinstance(p.get("vocab_size"), int) and p["vocab_size"] > 0:
        return int(p["vocab_size"])
    if isinstance(p.get("vocab"), list) and p["vocab"]:
        return len(p["vocab"])
    return None


def map_ecd(
    config: LudwigConfig,
    draft: Draft,
    stats: Any,
    dataset: Path | None,
    data: LudwigData | None = None,
) -> Candidate:
    """The model section of an ECD config; returns the carrying Candidate (an estimate has trainable
    True and no sequence length). `data`: what Ludwig learns from the dataset (vocabularies,
    tokenized lengths)."""
    defaults = config.defaults
    pretrained: list[Candidate] = []
    cost, widths, counted, image_kinds = est.Cost(), [], [], []
    for f in config.inputs:
        ftype, kind, p, pre, where = f.type, f.encoder, f.encoder_params, f.ludwig_preprocessing, f.where
        _note_encoder_defaults(draft, f, defaults)
        if ftype in ("text", "sequence", "timeseries"):
            if kind in HF_TEXT_ENCODERS and ftype == "text":
                pretrained.append(_text_candidate(f, stats))
                continue
            if kind not in est.SEQUENCE_ENCODERS:
                raise UnsupportedError(
                    f"{where}: {ftype} encoder {quote(kind)} is not supported; supported: "
                    f"{', '.join(est.SEQUENCE_ENCODERS)} and the pretrained text encoders ({', '.join(HF_TEXT_ENCODERS)})"
                )
            cap = int(p.get("max_sequence_length") or pre.get("max_sequence_length") or TEXT_DEFAULT_MAX_LEN)
            text = data.texts.get(f.column) if data is not None else None
            known = _vocab_from_config(
                p
            )  # a config Ludwig resolved after preprocessing (its callbacks get one)
            vocab = text.vocab_size if text is not None else (known or est.ASSUMED_TEXT_VOCAB)
            if known and text is None:
                seq = cap
                draft.note(
                    f"{where}: vocabulary {vocab:,} and sequence length {seq} from the config (Ludwig's, "
                    f"after preprocessing)"
                )
            elif text is not None:
                seq = text.padded_length(cap)
                draft.note(
                    f"{where}: Ludwig's {text.tokenizer} tokenizer on the data: vocabulary {vocab:,} (distinct "
                    f"tokens + 4 special symbols), sequences padded to {seq} (longest {text.longest_tokens} tokens + "
                    f"start/stop, cap {cap}), {text.mean_tokens:.1f} tokens per row on average"
                )
            else:
                seq = cap
                if stats is not None and f.column in stats.text_columns:
                    seq = max(1, min(seq, stats.max_tokens(f.column) + 2))
                draft.note(
                    f"{where}: vocabulary assumed {vocab:,} (Ludwig's most_common cap; Ludwig builds it from the "
                    f"data: pass --dataset) and sequence length {seq}"
                )
            part, out = est.sequence_encoder(kind, p, seq, vocab)
        elif ftype == "image":
            if kind not in IMAGE_ENCODERS:
                raise UnsupportedError(
                    f"{where}: image encoder {quote(kind)} is not supported; supported: {', '.join(IMAGE_ENCODERS)}"
                )
            if kind in TIMM_ENCODERS:
                pretrained.append(_timm(f, dataset, draft.notes, TIMM_ENCODERS[kind]))
                continue
            if kind in TORCHVISION_DEFAULTS:
                pretrained.append(_torchvision(f, draft.notes))
                continue
            h, w, c = image_size(f, dataset, 224 if kind in ("vit", "resnet") else 256, draft.notes)
            if kind == "vit":
                pretrained.append(_vit(f, h, w))
                continue
            if kind == "resnet":
                pretrained.append(_resnet(f, h, w))
                continue
            image_kinds.append(kind)
            if kind == "unet":
                classes = next(
                    (
                        int(o.preprocessing.get("num_classes") or 2)
                        for o in config.outputs
                        if o.type_given == "image"
                    ),
                    2,
                )
                part, out = est.unet(h, w, c, classes), 0.0
            else:
                part, out = est.image_stacked_cnn(p, h, w, c)
        elif ftype in est.SMALL_FEATURE_TYPES:
            cat_vocab = data.categories.get(f.column) if data is not None and ftype == "category" else None
            part, out = est.small_feature(ftype, kind, p, cat_vocab or _vocab_from_config(p))
        else:
            raise UnsupportedError(
                f"{where}: input feature type {quote(ftype)} is not supported; supported: text, sequence, "
                f"timeseries, image, {', '.join(est.SMALL_FEATURE_TYPES)}"
            )
        cost += part
        widths.append(out)
        counted.append(f"{ftype}/{kind}")
    if pretrained:
        names = {tuple(sorted(c.model.items())) for c in pretrained}
        if len(names) > 1:
            raise UnsupportedError(
                "ECD models with several different pretrained encoders ("
                + "; ".join(c.label for c in pretrained)
                + ") are not supported: keep one"
            )
        chosen = pretrained[0]
        if len(pretrained) > 1:
            layers = int(chosen.model.get("num_layers") or get_model(chosen.model["name"]).num_layers or 0)
            if not layers:  # a CNN is not a stack of layers to repeat
                raise UnsupportedError(
                    f"{len(pretrained)} input features with the same {chosen.model['name']} encoder are not "
                    "supported for a model without transformer layers: keep one"
                )
            chosen.model["num_layers"] = layers * len(pretrained)
            draft.note(
                f"{len(pretrained)} input features use the same {chosen.model['name']} encoder: counted as one "
                f"model with {len(pretrained)} x {layers} layers"
            )
        if counted:
            draft.note(
                f"{len(counted)} other input feature(s) ({', '.join(sorted(set(counted)))}), the combiner and "
                f"the decoders are small next to {chosen.model['name']} and are not counted"
            )
        _note_text_outputs(config.outputs, draft)
        return chosen
    return _estimate(config, draft, cost, widths, counted, image_kinds, data)


def _note_text_outputs(outputs: tuple[LudwigFeature, ...], draft: Draft) -> None:
    for o in outputs:
        if o.type in ("text", "sequence"):
            draft.note(f"output feature {o.name} ({o.type_given}): its sequence decoder is not counted")


def _estimate(
    config: LudwigConfig,
    draft: Draft,
    cost: est.Cost,
    widths: list[float],
    counted: list[str],
    image_kinds: list[str],
    data: LudwigData | None,
) -> Candidate:
    comb, line = config.combiner, config.combiner_line
    if line:
        draft.note(line)
    ctype = str(comb.get("type", "concat")).lower()
    width = float(sum(widths))
    if ctype == "concat":
        part, width = est.fc_stack(width, est.fc_widths(comb, []))
    elif ctype == "tabnet":
        part, width = est.tabnet(width, comb)
    elif ctype == "ft_transformer":
        part, width = est.ft_transformer(widths, comb)
    else:
        raise UnsupportedError(
            f"combiner.type {ctype} is not supported for a model perfmodel has to estimate; supported: "
            f"concat, tabnet, ft_transformer"
        )
    cost += part
    for o in config.outputs:
        otype = o.type
        if otype in ("text", "sequence", "image"):
            continue
        if otype in ("binary", "number"):
            cost += est.linear(max(width, 1.0), 1)  # regressor decoder: one output
            continue
        classes = data.categories.get(o.column) if data is not None else None
        classes = classes or int(o.spec.get("num_classes") or o.preprocessing.get("num_classes") or 2)
        cost += est.linear(max(width, 1.0), classes)
    _note_text_outputs(config.outputs, draft)
    arch = "cnn" if cost.conv else ("other" if cost.recurrent else "mlp")
    sequence_kinds = [
        c.split("/")[1] for c in counted if c.split("/")[0] in ("text", "sequence", "timeseries")
    ]
    label = image_kinds[0] if image_kinds else (f"{sequence_kinds[0]}-{ctype}" if sequence_kinds else ctype)
    params = max(1, round(cost.params))
    gflops = max(cost.flops / 1e9, 1e-9)
    act_mb = cost.acts * 2 / 1e6
    kinds = ", ".join(
        f"{n} x {k}" if n > 1 else k for k, n in sorted({k: counted.count(k) for k in counted}.items())
    )
    vocabs = (
        f"category vocabularies from the data: {', '.join(f'{c} {v:,}' for c, v in data.categories.items())}"
        if data is not None and data.categories
        else f"category vocabularies assumed {est.ASSUMED_CATEGORY_VOCAB:,}"
    )
    draft.note(
        f"model estimated from the Ludwig config ({kinds}; {ctype} combiner): {params:,} parameters, "
        f"{gflops:.3g} GFLOPs forward and {act_mb:.3g} MB of 16-bit activations per sample ({vocabs})"
    )
    model = {
        "name": f"ludwig-{label}",
        "family": "ludwig-ecd",
        "arch": arch,
        "params_total": params,
        "forward_gflops_per_sample": float(f"{gflops:.6g}"),
        "activation_mb_per_sample": float(f"{max(act_mb, 1e-6):.6g}"),
        "reference_input": f"one sample of {len(counted)} input feature(s)",
        "source": "perfmodel estimate from the Ludwig config's layer sizes and Ludwig's defaults",
    }
    if cost.part is not None:
        model.update(cost.part.model_fields())
        pt = cost.part
        draft.note(
            f"its transformer stack ({pt.layers} layer(s), width {pt.hidden_size}, {pt.num_heads} heads, "
            f"feed-forward {pt.ffn_size}, over {pt.tokens} tokens per sample"
            + (f", {pt.inputs} per-feature projections" if pt.inputs else "")
            + ") is costed kernel by kernel: projections, attention, layer norms, dropout, residuals"
        )
        if cost.extra_parts:
            draft.note(
                f"{cost.extra_parts} further transformer stack(s) counted by their FLOPs only (the "
                f"model holds one kernel-by-kernel stack: the larger)"
            )
    return Candidate(label=f"ludwig-{label}", model=model)
