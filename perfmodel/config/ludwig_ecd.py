"""Ludwig ECD (encoder-combiner-decoder) models -> the native `model` section.

A pretrained transformer encoder (bert, roberta, auto_transformer, vit, ...) becomes the catalog
model it loads; a torchvision resnet becomes the catalog resnet scaled to the image size; any other
model is estimated part by part (ludwig_estimates.py) and given as params_total /
forward_gflops_per_sample / activation_mb_per_sample. Anything perfmodel cannot cost raises
UnsupportedError naming the part and what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_model
from perfmodel.config import ludwig_estimates as est
from perfmodel.config.ludwig_features import column, encoder_of, features, preprocessing_of, section
from perfmodel.config.native import Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote

HF_TEXT_ENCODERS = {
    "bert": "bert-base-uncased", "distilbert": "distilbert-base-uncased", "roberta": "roberta-base",
    "t5": "t5-small", "mt5": "google/mt5-base", "gpt2": "gpt2", "gpt": "openai-gpt", "albert": "albert-base-v2",
    "xlmroberta": "xlm-roberta-base", "electra": "google/electra-small-discriminator", "camembert": "camembert-base",
    "longformer": "allenai/longformer-base-4096", "xlnet": "xlnet-base-cased", "flaubert": "flaubert/flaubert_small_cased",
    "ctrl": "ctrl", "transformer_xl": "transfo-xl-wt103", "xlm": "xlm-mlm-en-2048", "deberta": "microsoft/deberta-v3-base",
    "auto_transformer": "", "llm": "",
}
"""Ludwig text encoder -> its default pretrained_model_name_or_path (ludwig/schema/encoders/text_encoders.py)."""
IMAGE_ENCODERS = ("stacked_cnn", "resnet", "vit", "unet")
_HF_DIMS = {"hidden_size": "hidden_size", "d_model": "hidden_size", "num_hidden_layers": "num_layers",
            "num_attention_heads": "num_heads", "num_heads": "num_heads", "intermediate_size": "ffn_hidden_size",
            "d_ff": "ffn_hidden_size", "vocab_size": "vocab_size"}
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


def _text_candidate(i: int, f: dict[str, Any], kind: str, p: dict[str, Any], own: set[str],
                    pre: dict[str, Any], stats: Any) -> Candidate:
    path = f"input_features[{i}] ({f['name']})"
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
    if stats is not None and column(f) in stats.text_columns:
        longest = stats.max_tokens(column(f)) + 2
        c.seq_len = max(1, min(int(cap or TEXT_DEFAULT_MAX_LEN), longest))
        c.seq_line = (f"{path}: sequence length {c.seq_len} = longest text in column {column(f)} "
                      f"(~{longest} tokens by characters/4, with 2 special tokens) capped at max_sequence_length "
                      f"{cap or TEXT_DEFAULT_MAX_LEN}")
    elif cap:
        c.seq_len = int(cap)
    else:
        c.seq_len, c.seq_is_default = TEXT_DEFAULT_MAX_LEN, True
        c.seq_line = (f"{path}: max_sequence_length not given: Ludwig's default {TEXT_DEFAULT_MAX_LEN} assumed as the "
                      f"sequence length (an upper bound: Ludwig pads to the longest text in the data; pass --dataset)")
    c.trainable = bool(p.get("trainable", False))
    if "trainable" not in own:
        c.trainable_line = (f"{path}: encoder trainable not given: Ludwig's default for pretrained {kind} encoders is "
                            f"false (frozen encoder, forward pass only)")
    if p.get("gradient_checkpointing") is not None:
        c.checkpointing = bool(p["gradient_checkpointing"])
    return c


def _probe_image(dataset: Path | None, f: dict[str, Any]) -> tuple[int, int, int] | None:
    if dataset is None:
        return None
    try:
        from PIL import Image

        from perfmodel.config.dataset_size import first_value

        value = first_value(dataset, column(f))
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


def image_size(i: int, f: dict[str, Any], p: dict[str, Any], pre: dict[str, Any], dataset: Path | None,
               default: int, notes: list[str]) -> tuple[int, int, int]:
    path = f"input_features[{i}] ({f['name']})"
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
    notes.append(f"{path}: image size not given (Ludwig infers it from the images): assumed {h}x{w}x{c}; "
                 f"add preprocessing height/width/num_channels to the feature to change it")
    return h, w, c


def _vit(i: int, f: dict[str, Any], p: dict[str, Any], h: int, w: int) -> Candidate:
    patch = int(p.get("patch_size") or 16)
    tokens = (h // patch) * (w // patch) + 1
    d, layers = int(p.get("hidden_size") or 768), int(p.get("num_hidden_layers") or 12)
    heads, ffn = int(p.get("num_attention_heads") or 12), int(p.get("intermediate_size") or 3072)
    standard = (d, layers, heads, ffn, patch) == (768, 12, 12, 3072, 16)
    model = {"name": "vit-b16" if standard else "ludwig-vit", "family": "vit", "arch": "encoder", "hidden_size": d,
             "num_layers": layers, "num_heads": heads, "ffn_hidden_size": ffn, "vocab_size": 0,
             "learned_pos_embeddings": tokens, "reference_input": f"{h}x{w} image, {patch}x{patch} patches"}
    return Candidate(label=f"input_features[{i}] ({f['name']}): vit encoder", model=model, seq_len=tokens,
                     seq_line=f"input_features[{i}] ({f['name']}): vit sequence length {tokens} = ({h}/{patch}) x ({w}/{patch}) patches + [CLS]",
                     trainable=bool(p.get("trainable", True)))


def _resnet(i: int, f: dict[str, Any], p: dict[str, Any], h: int, w: int) -> Candidate:
    size = int(p.get("model_variant") or p.get("resnet_size") or 50)
    base = get_model(f"resnet{size}")
    factor = h * w / (224 * 224)
    model: dict[str, Any] = {"name": base.name, "reference_input": f"{h}x{w} image"}
    if abs(factor - 1) > 1e-9:
        model["forward_gflops_per_sample"] = float(base.forward_gflops_per_sample or 0) * factor
        if base.activation_mb_per_sample:
            model["activation_mb_per_sample"] = base.activation_mb_per_sample * factor
    return Candidate(label=f"input_features[{i}] ({f['name']}): resnet{size} encoder", model=model,
                     trainable=bool(p.get("trainable", True)))


def map_ecd(cfg: dict[str, Any], draft: Draft, stats: Any, dataset: Path | None) -> Candidate:
    """The model section of an ECD config; returns the carrying Candidate (an estimate has trainable
    True and no sequence length)."""
    inputs = features(cfg, "input_features")
    outputs = features(cfg, "output_features")
    pretrained: list[Candidate] = []
    cost, width, counted, image_kinds = est.Cost(), 0.0, [], []
    for i, f in enumerate(inputs):
        ftype = str(f["type"]).lower()
        kind, p, own = encoder_of(f, cfg)
        pre = preprocessing_of(f, cfg)
        where = f"input_features[{i}] ({f['name']})"
        if ftype in ("text", "sequence", "timeseries"):
            if kind in HF_TEXT_ENCODERS and ftype == "text":
                pretrained.append(_text_candidate(i, f, kind, p, own, pre, stats))
                continue
            if kind not in est.SEQUENCE_ENCODERS:
                raise UnsupportedError(f"{where}: {ftype} encoder {quote(kind)} is not supported; supported: "
                                       f"{', '.join(est.SEQUENCE_ENCODERS)} and the pretrained text encoders ({', '.join(HF_TEXT_ENCODERS)})")
            seq = int(p.get("max_sequence_length") or pre.get("max_sequence_length") or TEXT_DEFAULT_MAX_LEN)
            if stats is not None and column(f) in stats.text_columns:
                seq = max(1, min(seq, stats.max_tokens(column(f)) + 2))
            part, out = est.sequence_encoder(kind, p, seq)
        elif ftype == "image":
            if kind not in IMAGE_ENCODERS:
                raise UnsupportedError(f"{where}: image encoder {quote(kind)} is not supported; supported: {', '.join(IMAGE_ENCODERS)}")
            h, w, c = image_size(i, f, p, pre, dataset, 224 if kind in ("vit", "resnet") else 256, draft.notes)
            if kind == "vit":
                pretrained.append(_vit(i, f, p, h, w))
                continue
            if kind == "resnet":
                pretrained.append(_resnet(i, f, p, h, w))
                continue
            image_kinds.append(kind)
            if kind == "unet":
                classes = next((int(preprocessing_of(o, cfg).get("num_classes") or 2) for o in outputs if str(o["type"]) == "image"), 2)
                part, out = est.unet(h, w, c, classes), 0.0
            else:
                part, out = est.image_stacked_cnn(p, h, w, c)
        elif ftype in est.SMALL_FEATURE_TYPES:
            part, out = est.small_feature(ftype, kind, p)
        else:
            raise UnsupportedError(f"{where}: input feature type {quote(ftype)} is not supported; supported: text, sequence, "
                                   f"timeseries, image, {', '.join(est.SMALL_FEATURE_TYPES)}")
        cost += part
        width += out
        counted.append(f"{ftype}/{kind}")
    if pretrained:
        names = {tuple(sorted(c.model.items())) for c in pretrained}
        if len(names) > 1:
            raise UnsupportedError("ECD models with several different pretrained encoders ("
                                   + "; ".join(c.label for c in pretrained) + ") are not supported: keep one")
        chosen = pretrained[0]
        if len(pretrained) > 1:
            layers = int(chosen.model.get("num_layers") or get_model(chosen.model["name"]).num_layers or 0)
            chosen.model["num_layers"] = layers * len(pretrained)
            draft.note(f"{len(pretrained)} input features use the same {chosen.model['name']} encoder: counted as one "
                       f"model with {len(pretrained)} x {layers} layers")
        if counted:
            draft.note(f"{len(counted)} other input feature(s) ({', '.join(sorted(set(counted)))}), the combiner and "
                       f"the decoders are small next to {chosen.model['name']} and are not counted")
        _note_text_outputs(outputs, draft)
        return chosen
    return _estimate(cfg, outputs, draft, cost, width, counted, image_kinds)


def _note_text_outputs(outputs: list[dict[str, Any]], draft: Draft) -> None:
    for o in outputs:
        if str(o["type"]).lower() in ("text", "sequence"):
            draft.note(f"output feature {o['name']} ({o['type']}): its sequence decoder is not counted")


def _estimate(cfg: dict[str, Any], outputs: list[dict[str, Any]], draft: Draft, cost: est.Cost, width: float,
              counted: list[str], image_kinds: list[str]) -> Candidate:
    comb = section(cfg, "combiner", "combiner")
    ctype = str(comb.get("type", "concat")).lower()
    if ctype == "concat":
        part, width = est.fc_stack(width, est.fc_widths(comb, []))
    elif ctype == "tabnet":
        part, width = est.tabnet(width, comb)
    else:
        raise UnsupportedError(f"combiner.type {ctype} is not supported for a model perfmodel has to estimate; supported: concat, tabnet")
    cost += part
    for o in outputs:
        otype = str(o["type"]).lower()
        if otype in ("text", "sequence"):
            continue
        if otype != "image":
            cost += est.linear(max(width, 1.0), int(preprocessing_of(o, cfg).get("num_classes") or 2))
    _note_text_outputs(outputs, draft)
    arch = "cnn" if cost.conv else ("other" if cost.recurrent else "mlp")
    label = image_kinds[0] if image_kinds else ctype
    params = max(1, round(cost.params))
    gflops = max(cost.flops / 1e9, 1e-9)
    act_mb = cost.acts * 2 / 1e6
    kinds = ", ".join(f"{n} x {k}" if n > 1 else k for k, n in sorted({k: counted.count(k) for k in counted}.items()))
    draft.note(
        f"model estimated from the Ludwig config ({kinds}; {ctype} combiner): {params:,} parameters, "
        f"{gflops:.3g} GFLOPs forward and {act_mb:.3g} MB of 16-bit activations per sample "
        f"(category vocabularies assumed {est.ASSUMED_CATEGORY_VOCAB}, text vocabulary {est.ASSUMED_TEXT_VOCAB})"
    )
    model = {"name": f"ludwig-{label}", "family": "ludwig-ecd", "arch": arch, "params_total": params,
             "forward_gflops_per_sample": float(f"{gflops:.6g}"), "activation_mb_per_sample": float(f"{max(act_mb, 1e-6):.6g}"),
             "reference_input": f"one sample of {len(counted)} input feature(s)",
             "source": "perfmodel estimate from the Ludwig config's layer sizes and Ludwig's defaults"}
    return Candidate(label=f"ludwig-{label}", model=model)
