"""Reading Ludwig features: the encoder and preprocessing a feature ends up with (feature, then
`defaults:`, then legacy top-level per-type `preprocessing:`, then Ludwig's type default), and
LoRA adapters. A bare string encoder (legacy) takes its parameters from the feature itself.
"""

from __future__ import annotations

from typing import Any

from perfmodel.config.native import Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote

TYPE_DEFAULT_ENCODER = {"text": "parallel_cnn", "sequence": "embed", "timeseries": "parallel_cnn", "image": "stacked_cnn",
                        "category": "dense", "number": "passthrough", "binary": "passthrough", "set": "embed",
                        "bag": "embed", "date": "embed", "h3": "embed", "vector": "dense", "audio": "parallel_cnn"}
"""Ludwig's default encoder per input feature type."""
_FEATURE_KEYS = {"name", "type", "column", "proc_column", "preprocessing", "encoder", "decoder", "tied", "loss"}


def section(d: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path} must be a mapping, got {quote(value)}")
    return value


def features(cfg: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = cfg.get(key)
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key} is required in a Ludwig config: a list of features, each with a name and a type")
    for i, f in enumerate(value):
        if not isinstance(f, dict) or "name" not in f or "type" not in f:
            raise ConfigError(f"{key}[{i}] must be a mapping with a name and a type, got {quote(f)}")
    return value


def column(f: dict[str, Any]) -> str:
    return str(f.get("column") or f["name"])


def encoder_of(f: dict[str, Any], cfg: dict[str, Any]) -> tuple[str, dict[str, Any], set[str]]:
    """(encoder type, parameters, keys the user wrote) from the feature, `defaults:` and Ludwig's
    type default. A bare string encoder (legacy) takes its parameters from the feature itself."""
    ftype = str(f["type"]).lower()
    defaults = section(section(section(cfg, "defaults", "defaults"), ftype, f"defaults.{ftype}"), "encoder", f"defaults.{ftype}.encoder")
    enc = f.get("encoder")
    flat = {k: v for k, v in f.items() if k not in _FEATURE_KEYS}
    if isinstance(enc, dict):
        own = {**flat, **enc}
    else:
        own = dict(flat)
        if enc is not None:
            own["type"] = str(enc)
    params = {**{k: v for k, v in defaults.items()}, **own}
    kind = str(params.pop("type", None) or TYPE_DEFAULT_ENCODER.get(ftype, "")).lower()
    return kind, params, set(own)


def preprocessing_of(f: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    ftype = str(f["type"]).lower()
    legacy = section(section(cfg, "preprocessing", "preprocessing"), ftype, f"preprocessing.{ftype}")
    defaults = section(section(section(cfg, "defaults", "defaults"), ftype, f"defaults.{ftype}"), "preprocessing", f"defaults.{ftype}.preprocessing")
    return {**legacy, **defaults, **section(f, "preprocessing", f"{f['name']}.preprocessing")}


def apply_adapter(draft: Draft, adapter: Any, path: str) -> bool:
    """LoRA-style adapters -> training.lora_r (+ lora_target_modules); False when no adapter."""
    if not adapter:
        return False
    spec = {"type": adapter} if isinstance(adapter, str) else adapter
    if not isinstance(spec, dict):
        raise ConfigError(f"{path} must be an adapter type or a mapping, got {quote(adapter)}")
    kind = str(spec.get("type", "lora")).lower()
    if kind not in ("lora", "adalora", "qlora"):
        raise UnsupportedError(f"{path}.type {kind} is not supported: perfmodel models LoRA adapters (lora, adalora; quantization.bits for QLoRA)")
    if spec.get("r") is not None:
        draft.set("training.lora_r", spec["r"])
    else:
        draft.default("training.lora_r", 8, f"{path}.r not given: Ludwig's LoRA default r=8")
    targets = spec.get("target_modules")
    if isinstance(targets, list) and targets:
        draft.set("training.lora_target_modules", len(targets))
    elif targets == "all-linear":
        draft.set("training.lora_target_modules", 7)
    return True

