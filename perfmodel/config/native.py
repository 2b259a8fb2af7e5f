"""The native perfmodel config (DESIGN.md, "Contracts"): sections `model`, `training`, `hardware`.

Allowed keys are the contract keys plus every field of ModelSpec / TrainingSpec / ParallelSpec
(so anything a Workload holds can be given), and these extensions: `model.path` (a Hugging Face
config.json or its folder), `training.dataset` / `training.text_columns` (size the data from a
file), and a top-level `framework`. Unknown keys are a ConfigError naming the key path and the
allowed keys. Numbers written as strings (PyYAML reads `5.0e8` as a string) are accepted.

Resolution: defaults -> file -> flags. A `Draft` carries the config as read (file, then `--set`,
then flags) plus `soft` defaults from another format (Ludwig's own defaults); build.py fills the
rest with perfmodel's defaults and turns it into a Workload.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_model
from perfmodel.errors import CatalogError, ConfigError
from perfmodel.workload import ModelSpec, ParallelSpec, TrainingSpec, Workload

SECTIONS = ("model", "training", "hardware")
TOP_LEVEL = (*SECTIONS, "framework")
MISSING_AMOUNT = (
    "training.tokens (or training.samples, or training.steps) is required: give it in the file "
    "or with --tokens/--rows/--dataset"
)
_DIM_KEYS = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size",
             "gated_mlp", "num_experts", "learned_pos_embeddings")


@dataclass
class Draft:
    """A config on its way to a Workload: explicit values (file, overrides, flags) in `native`,
    defaults of the source format in `soft` (dotted key -> (value, assumption line)), and notes."""

    native: dict[str, Any] = field(default_factory=lambda: {s: {} for s in SECTIONS})
    soft: dict[str, tuple[Any, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing_amount: str = MISSING_AMOUNT

    def set(self, dotted: str, value: Any) -> None:
        section, key = dotted.split(".")
        self.native.setdefault(section, {})[key] = value

    def default(self, dotted: str, value: Any, line: str) -> None:
        self.soft[dotted] = (value, line)

    def note(self, line: str) -> None:
        self.notes.append(line)


@dataclass(frozen=True)
class DataFlags:
    """--tokens / --rows / --dataset (at most one)."""

    tokens: float | None = None
    rows: int | None = None
    dataset: Path | None = None

    @property
    def given(self) -> bool:
        return self.tokens is not None or self.rows is not None or self.dataset is not None


# --- schema -------------------------------------------------------------------------------------


def _field_types(cls: type) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    out: dict[str, type] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[f.name] = typing.get_origin(hint) or hint
    return out


@functools.cache
def schema() -> dict[str, dict[str, type]]:
    """Allowed keys and their types, per section."""
    return {
        "model": {"name": str, "path": str, **{k: v for k, v in _field_types(ModelSpec).items() if k != "name"}},
        "training": {**_field_types(TrainingSpec), "dataset": str, "text_columns": list},
        "hardware": {"gpu": str, **_field_types(ParallelSpec)},
    }


def check_key(parts: tuple[str, ...], origin: str) -> None:
    """ConfigError unless `parts` is a native key path (used for --set)."""
    if parts == ("framework",):
        return
    if parts[0] not in SECTIONS:
        raise ConfigError(f"{origin}: unknown section {parts[0]!r}; allowed: {', '.join(TOP_LEVEL)}")
    allowed = schema()[parts[0]]
    if len(parts) != 2 or parts[1] not in allowed:
        raise ConfigError(
            f"{origin}: unknown key {'.'.join(parts)}; allowed keys in {parts[0]}: {', '.join(allowed)}"
        )


def _coerce(path: str, value: Any, typ: type) -> Any:
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path} must be true or false, got {value!r}")
    if typ in (int, float):
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip().replace("_", ""))
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise ConfigError(f"{path} must be a number, got {value!r}")
        if typ is int:
            if not number.is_integer():
                raise ConfigError(f"{path} must be a whole number, got {value!r}")
            return int(number)
        return number
    if typ is str:
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{path} must be a non-empty string, got {value!r}")
    if typ is list:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and items and all(isinstance(x, str) for x in items):
            return items
        raise ConfigError(f"{path} must be a list of column names, got {value!r}")
    return value


def validate(raw: dict[str, Any]) -> dict[str, Any]:
    """Check keys and types; returns {'model': {...}, 'training': {...}, 'hardware': {...}, 'framework': ...}
    with None values dropped."""
    out: dict[str, Any] = {s: {} for s in SECTIONS}
    for key, value in raw.items():
        if key not in TOP_LEVEL:
            raise ConfigError(f"unknown top-level key {key!r}; allowed: {', '.join(TOP_LEVEL)}")
        if value is None:
            continue
        if key == "framework":
            out["framework"] = _coerce("framework", value, str)
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping of keys (e.g. {key}.{next(iter(schema()[key]))}: ...), got {value!r}")
        allowed = schema()[key]
        for k, v in value.items():
            if k not in allowed:
                raise ConfigError(f"unknown key {key}.{k}; allowed keys in {key}: {', '.join(allowed)}")
            if v is not None:
                out[key][k] = _coerce(f"{key}.{k}", v, allowed[k])
    return out


def _has_dims(m: dict[str, Any]) -> bool:
    arch = m.get("arch", "decoder")
    if arch == "gbm":
        return True
    if arch in ("decoder", "encoder", "encoder-decoder"):
        return all(k in m for k in ("hidden_size", "num_layers", "num_heads"))
    return "params_total" in m and "forward_gflops_per_sample" in m


def resolve_model(m: dict[str, Any], base_dir: Path | None) -> ModelSpec:
    """Catalog entry (model.name or model.path) with explicit dims on top, or a custom model."""
    fields = {k: v for k, v in m.items() if k not in ("name", "path")}
    name, path = m.get("name"), m.get("path")
    base: ModelSpec | None = None
    if path is not None:
        p = Path(path).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        if not p.exists():
            raise ConfigError(f"model.path {p} does not exist (give a Hugging Face config.json or its folder)")
        if p.is_dir() and not (p / "config.json").is_file():
            raise ConfigError(f"model.path {p} holds no config.json")
        base = get_model(str(p))
    elif name is not None:
        try:
            base = get_model(name)
        except CatalogError:
            if not _has_dims(fields):
                raise
    elif not fields:
        raise ConfigError(
            "model.name is required: a catalog name (`perfmodel models` lists them) or a Hugging Face id; "
            "or give model.hidden_size, model.num_layers and model.num_heads (or model.path to a config.json)"
        )
    if base is None:
        return ModelSpec(name=name or "custom", **fields)
    if name is not None and path is not None:
        fields["name"] = name
    if any(k in fields for k in _DIM_KEYS) and "params_total" not in fields and base.is_transformer:
        fields["params_total"] = None  # a catalog total no longer matches changed dims
    return dataclasses.replace(base, **fields) if fields else base


def workload_to_native(w: Workload) -> dict[str, Any]:
    """The resolved native config of a workload (every field explicit): loading it again gives the
    same workload. For recording next to a prediction (MLflow params, --json)."""
    model = {k: v for k, v in dataclasses.asdict(w.model).items() if v is not None}
    training = {k: v for k, v in dataclasses.asdict(w.training).items() if v is not None}
    hardware = {"gpu": w.gpu.name, **dataclasses.asdict(w.parallel)}
    return {"model": model, "training": training, "hardware": hardware, "framework": w.framework}
