"""Model lookup over the catalog data: a catalog key, alias or Hugging Face id; a local Hugging
Face config.json (or its folder); or a Hugging Face id whose config.json is in the local Hugging
Face cache (read offline, never downloaded).

Order: a path that exists (relative to `base_dir` when given: a config's folder), then the
catalog, then the Hugging Face cache. A model read from a config.json is named after the id or
the folder it was found under, never after text inside the file.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import re
from pathlib import Path
from typing import Any

from perfmodel.catalog.data import model_entries, model_index, norm, unknown_name
from perfmodel.errors import ConfigError, clip, quote
from perfmodel.safe_yaml import read_bounded
from perfmodel.workload import ModelSpec

_MODEL_FIELDS = {f.name for f in dataclasses.fields(ModelSpec)}
MAX_HF_CONFIG_BYTES = 5_000_000
"""Largest config.json read (the largest real ones, with label maps, are a few hundred kB)."""
_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def model_names() -> list[str]:
    """Catalog keys of every model architecture."""
    return list(model_entries())


def resolve_model_key(name: str) -> str | None:
    """The catalog key for a name, alias or Hugging Face id, or None."""
    return model_index().get(norm(name))


def model_from_entry(entry: dict[str, Any]) -> ModelSpec:
    """A ModelSpec from a catalog mapping (keys that are not ModelSpec fields skipped)."""
    return ModelSpec(**{k: v for k, v in entry.items() if k in _MODEL_FIELDS})


def model_entry(name: str) -> dict[str, Any]:
    """The raw catalog mapping (with sources) for display."""
    key = resolve_model_key(name)
    if key is None:
        raise unknown_name("model", name, model_names(), "(`perfmodel models` lists them)")
    return dict(model_entries()[key])


def local_config_path(name: str, base_dir: Path | None = None) -> Path | None:
    """The Hugging Face config.json that `name` points to as a path (a folder holding config.json,
    or a .json file), relative to `base_dir` when given (else the current directory); None when
    `name` is not such a path."""
    try:
        p = Path(name).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir) / p
        if p.is_dir() and (p / "config.json").is_file():
            return p / "config.json"
        if p.is_file() and p.suffix == ".json":
            return p
    except (OSError, ValueError):  # a name too long for a path, or with a NUL byte
        return None
    return None


def hf_cached_config(repo_id: str) -> Path | None:
    """config.json of Hugging Face model `repo_id` in the local Hugging Face cache ($HF_HOME,
    $HF_HUB_CACHE), or None. Reads the cache only: never the network."""
    if not _HF_ID.match(repo_id):
        return None
    try:
        from huggingface_hub import constants, try_to_load_from_cache
    except ImportError:  # pragma: no cover - a core dependency; tolerate a trimmed install
        return None
    try:  # the cache folder read now (HF_HOME / HF_HUB_CACHE at import), passed explicitly
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=constants.HF_HUB_CACHE)
    except Exception:  # an id the hub library refuses: not cached
        return None
    return Path(found) if isinstance(found, str) else None


TIMM_PREFIX = "timm/"
"""`timm/<model name>`: a timm model of perfmodel's timm table (`timm_models.csv`)."""
TIMM_TABLE = Path(__file__).with_name("timm_models.csv")
"""The timm models the feature table trained on, as the plan costs them (collectors/public/timm_catalog.py)."""


@functools.cache
def timm_models() -> dict[str, dict[str, Any]]:
    """timm model name -> its row of TIMM_TABLE (numbers as int or float)."""
    with TIMM_TABLE.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    text = ("model", "family", "arch")
    return {
        r["model"]: {k: (v if k in text else (int(v) if k.endswith(("_layers", "_size", "_total")) else float(v)))
                     for k, v in r.items()}  # fmt: skip
        for r in rows
    }


def timm_model(name: str) -> tuple[ModelSpec, int]:
    """The ModelSpec of timm model `name` (`timm/` prefix optional; a pretrained tag such as
    `.sail_in22k_ft_in1k` is dropped) and the image side its numbers are for."""
    bare = name[len(TIMM_PREFIX) :] if name.lower().startswith(TIMM_PREFIX) else name
    bare = bare.split(".", 1)[0].strip().lower()
    row = timm_models().get(bare)
    if row is None:
        raise unknown_name(
            "timm model",
            bare,
            list(timm_models()),
            f"(the {len(timm_models())} timm models perfmodel has trained on, at their training image size: "
            f"perfmodel/catalog/timm_models.csv; for another, give model.arch, model.params_total, "
            f"model.forward_gflops_per_sample and model.activation_mb_per_sample)",
        )
    side = int(row["img_size"])
    fields = {k: v for k, v in row.items() if k in _MODEL_FIELDS and k not in ("model",)}
    spec = ModelSpec(
        **{**fields, "gemm_layers": fields.get("gemm_layers") or None},
        name=f"{TIMM_PREFIX}{bare}",
        reference_input=f"{side}x{side} image",
        source=f"timm {bare} at {side} px: timm's published GMACs, measured saved activations and the kernel "
        "census (perfmodel/catalog/timm_models.csv, collectors/public/timm_catalog.py)",
    )
    return spec, side


def get_model(name: str, *, base_dir: Path | None = None) -> ModelSpec:
    """The model called `name`: a path to a Hugging Face config.json or its folder (relative to
    `base_dir`, else the current directory), `timm/<name>` (a timm model of perfmodel's timm table), a
    catalog key, alias or Hugging Face id, or a Hugging Face id whose config.json is in the local
    Hugging Face cache."""
    if name.lower().startswith(TIMM_PREFIX):
        return timm_model(name)[0]
    path = local_config_path(name, base_dir)
    if path is not None:
        return model_from_hf_config(path)
    key = resolve_model_key(name)
    if key is not None:
        return model_from_entry(model_entries()[key])
    cached = hf_cached_config(name)
    if cached is not None:
        return model_from_hf_config(
            cached, name=name, source=f"Hugging Face config.json of {name} (local Hugging Face cache)"
        )
    raise unknown_name(
        "model",
        name,
        model_names(),
        "(`perfmodel models` lists them; a Hugging Face id is read from the local Hugging Face cache when its "
        "config.json is there; or give model.hidden_size, model.num_layers, model.num_heads, "
        "model.ffn_hidden_size and model.vocab_size, or a path to a Hugging Face config.json)",
    )


# --- Hugging Face config.json --------------------------------------------------------------

_HF_KEYS = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads"),
    "head_dim": ("head_dim",),
    "ffn_hidden_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "hidden_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_top_k", "top_k"),
}
_GATED_ACTIVATIONS = ("silu", "swiglu", "geglu", "gelu_pytorch_tanh", "gelu_new_gated")
_ENCODER_TYPES = (
    "bert",
    "roberta",
    "distilbert",
    "deberta",
    "deberta-v2",
    "electra",
    "xlm-roberta",
    "albert",
)
_ENCDEC_TYPES = ("t5", "mt5", "bart", "mbart", "pegasus", "marian")


def _whole(path: Path, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e18:
        raise ConfigError(f"Hugging Face config {path}: {key} must be a whole number, got {quote(value)}")
    if float(value) != int(value):
        raise ConfigError(f"Hugging Face config {path}: {key} must be a whole number, got {quote(value)}")
    return int(value)


def model_from_hf_config(path: Path, *, name: str | None = None, source: str | None = None) -> ModelSpec:
    """Read a Hugging Face config.json into a ModelSpec named `name` (default: the folder holding
    config.json, or the file's stem)."""
    path = Path(path)
    raw = read_bounded(path, what="Hugging Face config", limit_bytes=MAX_HF_CONFIG_BYTES)
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"Hugging Face config {path} is not valid JSON: {clip(str(exc))}") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"Hugging Face config {path} must hold a JSON object")
    if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:  # multimodal wrappers
        cfg = {**cfg["text_config"], "model_type": cfg.get("model_type", "")}
    values: dict[str, Any] = {}
    for field_name, keys in _HF_KEYS.items():
        for key in keys:
            if cfg.get(key) is not None:
                values[field_name] = _whole(path, key, cfg[key])
                break
    model_type = str(cfg.get("model_type", "")).lower()[:64]
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or cfg.get("hidden_activation") or "")
    gated = act in _GATED_ACTIVATIONS and model_type not in _ENCODER_TYPES + (
        "gpt2",
        "opt",
        "gpt_neox",
        "falcon",
    )
    if model_type in _ENCDEC_TYPES:
        arch = "encoder-decoder"
        enc = _whole(path, "num_layers", cfg.get("num_layers", 0))
        values["num_layers"] = enc + _whole(path, "num_decoder_layers", cfg.get("num_decoder_layers", enc))
        gated = str(cfg.get("feed_forward_proj", "")).startswith("gated")
    elif model_type in _ENCODER_TYPES:
        arch = "encoder"
    else:
        arch = "decoder"
    missing = [k for k in ("hidden_size", "num_layers", "num_heads") if k not in values]
    if missing:
        raise ConfigError(
            f"Hugging Face config {path} has no {missing[0]} (looked for {', '.join(_HF_KEYS[missing[0]])})"
        )
    positions = cfg.get("max_position_embeddings") or cfg.get("n_positions") or 0
    return ModelSpec(
        name=name or (path.parent.name if path.name == "config.json" else path.stem) or "hf-model",
        family=re.sub(r"[^a-z0-9.-]", "", model_type.split("_")[0]) or "custom",
        arch=arch,
        gated_mlp=gated,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", arch != "decoder")),
        learned_pos_embeddings=_whole(path, "max_position_embeddings", positions)
        if model_type in _ENCODER_TYPES + ("gpt2", "opt")
        else 0,
        source=source or f"Hugging Face config.json at {path}",
        **values,
    )
