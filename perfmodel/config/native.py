"""The native perfmodel config (DESIGN.md, "Contracts"): sections `model`, `training`, `hardware`.

Allowed keys are the contract keys plus every field of ModelSpec / TrainingSpec / ParallelSpec
(so anything a Workload holds can be given), and these extensions (`CONFIG_KEYS`): `model.path` (a
Hugging Face config.json or its folder), `training.dataset` / `training.text_columns` (size the
data from a file), and a top-level `framework`. Hugging Face `TrainingArguments` keys are read in
the training section where they map one-to-one (hf_args.py). Numbers written as strings (PyYAML
reads `5.0e8` as a string) are accepted; every number must be finite and inside its field's range
(`perfmodel.workload.FIELD_RANGES`).

Every problem is collected before anything is raised (`validate`, `combine_problems`): one
problem is one line; several are listed together (see `combine_problems` for the format). Unknown
keys name the key path, close matches and the allowed keys.

Resolution: defaults -> file -> flags. A `Draft` carries the config as read (file, then `--set`,
then flags) plus `soft` defaults from another format (Ludwig's own defaults); build.py fills the
rest with perfmodel's defaults and turns it into a Workload.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_model, local_config_path, model_from_hf_config
from perfmodel.catalog.frameworks import framework_names, resolve_framework
from perfmodel.config import hf_args
from perfmodel.errors import CatalogError, ConfigError, PerfModelError, clip, quote
from perfmodel.workload import (
    ModelSpec,
    ParallelSpec,
    TrainingSpec,
    Workload,
    field_problem,
)

SECTIONS = ("model", "training", "hardware")
TOP_LEVEL = (*SECTIONS, "framework")
MISSING_AMOUNT = (
    "training.tokens (or training.samples, or training.steps) is required: give it in the file "
    "or with --tokens/--rows/--dataset"
)
_DIM_KEYS = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size",
             "gated_mlp", "num_experts", "learned_pos_embeddings")

CONFIG_KEYS: dict[str, tuple[str, str]] = {
    "model.name": ("string", "Catalog key or alias (`perfmodel models`), `timm/<name>` (a timm model of "
                   "`perfmodel models --timm`, at the image size it was trained at), or a Hugging Face id: the catalog first, then "
                   "the id's config.json in the local Hugging Face cache (offline). A path to a Hugging Face "
                   "config.json or its folder is read too, relative to the config's folder. With the dimensions "
                   "below instead, any name."),
    "model.path": ("string", "A Hugging Face config.json or the folder holding it, relative to the config's folder; "
                   "the model is named after its folder unless model.name is given."),
    "training.dataset": ("string", "A CSV / TSV / Parquet / JSONL file (relative to the config's folder) whose rows "
                         "are counted as training.samples per epoch (used when neither tokens, samples nor steps "
                         "is given)."),
    "training.text_columns": ("list of strings", "Columns of training.dataset whose text is counted (characters / 4 "
                              "per token); default: every string column."),
    "hardware.gpu": ("string", "Accelerator catalog key or alias (`perfmodel gpus`), or cpu (this machine). An alias "
                     "(H100 -> H100-SXM) is resolved and the resolution listed in the assumptions."),
    "framework": ("string or mapping", "The training stack, as a recipe of the kernels it runs (`perfmodel frameworks` lists "
                  "them: hf-eager, torch-eager, torch-compile, liger, unsloth, torchtune, litgpt, lightning, ludwig, "
                  "deepspeed, megatron, nemo, torchtitan, composer, ...); an unknown name is costed as eager PyTorch "
                  "and says so; a mapping {name, base, <recipe fields>} describes a new stack. Default hf-eager."),
}
"""Keys of the config layer that are not Workload fields: dotted key -> (type, meaning)."""


@dataclass
class Draft:
    """A config on its way to a Workload: explicit values (file, overrides, flags) in `native`,
    defaults of the source format in `soft` (dotted key -> (value, assumption line)), and notes.
    `source` names the config in errors; `base_dir` is the config's folder (relative paths in the
    config are read from there)."""

    native: dict[str, Any] = field(default_factory=lambda: {s: {} for s in SECTIONS})
    soft: dict[str, tuple[Any, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing_amount: str = MISSING_AMOUNT
    source: str = "the config"
    base_dir: Path | None = None

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
    """Allowed native keys and their types, per section."""
    return {
        "model": {"name": str, "path": str, **{k: v for k, v in _field_types(ModelSpec).items() if k != "name"}},
        "training": {**_field_types(TrainingSpec), "dataset": str, "text_columns": list},
        "hardware": {"gpu": str, **_field_types(ParallelSpec)},
    }


def frameworks() -> tuple[str, ...]:
    """Named `framework` values: the catalog's recipes (perfmodel/catalog/frameworks/; aliases and
    custom recipes are accepted too, and an unknown name is costed with the `other` recipe)."""
    return framework_names()


def _name(key: Any) -> str:
    """A key as it appears in a dotted path (quoted and cut when odd or long)."""
    text = str(key)
    return text if len(text) <= 60 and text.isprintable() and " " not in text else quote(key, 60)


def _unknown_key(section: str, key: Any, origin: str = "") -> str:
    allowed = list(schema()[section])
    close = difflib.get_close_matches(str(key), allowed, n=2, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    hf = "; Hugging Face TrainingArguments keys are accepted too (docs/config.md)" if section == "training" else ""
    where = f"{origin}: " if origin else ""
    return f"{where}unknown key {section}.{_name(key)}{hint}; allowed keys in {section}: {', '.join(allowed)}{hf}"


def check_key(parts: tuple[str, ...], origin: str) -> None:
    """ConfigError unless `parts` is a native key path or a Hugging Face training key (for --set)."""
    if parts == ("framework",):
        return
    if parts[0] not in SECTIONS:
        raise ConfigError(f"{origin}: unknown section {quote(parts[0])}; allowed: {', '.join(TOP_LEVEL)}")
    if len(parts) == 2 and parts[0] == "training" and parts[1] in hf_args.KEYS:
        return
    if len(parts) != 2 or parts[1] not in schema()[parts[0]]:
        raise ConfigError(_unknown_key(parts[0], ".".join(parts[1:]), origin))


def _coerce(path: str, value: Any, typ: type) -> Any:
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path} must be true or false, got {quote(value)}")
    if typ in (int, float):
        number: float | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            # Python ints are exact: the range check decides; a float field keeps a huge int as is
            # (float() would overflow) and its range refuses it.
            return value if typ is int or abs(value) > 10**300 else float(value)
        if isinstance(value, float):
            number = value
        elif isinstance(value, str) and len(value) <= 64:
            try:
                number = float(value.strip().replace("_", ""))
            except ValueError:
                number = None
        if number is None:
            raise ConfigError(f"{path} must be a number, got {quote(value)}")
        if not math.isfinite(number):
            raise ConfigError(f"{path} must be a finite number, got {quote(value)}")
        if typ is int:
            if not number.is_integer():
                raise ConfigError(f"{path} must be a whole number, got {quote(value)}")
            return int(number)
        return number
    if typ is str:
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{path} must be a non-empty string, got {quote(value)}")
    if typ is list:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and items and all(isinstance(x, str) for x in items):
            return items
        raise ConfigError(f"{path} must be a list of column names, got {quote(value)}")
    return value


@dataclass
class Checked:
    """A config after key, type and range checks: the values that passed, the assumption lines
    of key mappings (Hugging Face keys), and every problem found (none raised yet)."""

    cfg: dict[str, Any]
    notes: list[str]
    problems: list[str]
    bad_keys: set[str]
    """Dotted keys (and sections) that had a problem: nothing is built from them."""

    def bad(self, prefix: str) -> bool:
        return any(k == prefix or k.startswith(prefix + ".") for k in self.bad_keys)


def validate(raw: dict[str, Any]) -> Checked:
    """Check every key, type and range of a native config, collecting all problems (so a config
    with several mistakes reports them at once). None values are dropped."""
    out: dict[str, Any] = {s: {} for s in SECTIONS}
    checked = Checked(cfg=out, notes=[], problems=[], bad_keys=set())

    def problem(dotted: str, message: str) -> None:
        checked.problems.append(message)
        checked.bad_keys.add(dotted)

    for key, value in raw.items():
        if key not in TOP_LEVEL:
            problem(str(key), f"unknown top-level key {quote(key)}; allowed: {', '.join(TOP_LEVEL)}")
            continue
        if value is None:
            continue
        if key == "framework":
            try:
                raw_name = value if isinstance(value, dict) else _coerce("framework", value, str)
                name, recipe, note = resolve_framework(raw_name)
            except ConfigError as exc:
                problem("framework", str(exc))
                continue
            out["framework"] = name
            if recipe is not None:
                out["framework_recipe"] = recipe
            if note:
                checked.notes.append(note)
            continue
        if not isinstance(value, dict):
            example = next(iter(schema()[key]))
            problem(key, f"{key} must be a mapping of keys (e.g. {key}.{example}: ...), got {quote(value)}")
            continue
        section = dict(value)
        if key == "training":
            section, notes, issues = hf_args.translate(section)
            checked.notes.extend(notes)
            for issue in issues:
                problem("training", issue)
        allowed = schema()[key]
        for k, v in section.items():
            dotted = f"{key}.{_name(k)}"
            if k not in allowed:
                problem(dotted, _unknown_key(key, k))
                continue
            if v is None:
                continue
            try:
                coerced = _coerce(dotted, v, allowed[k])
            except ConfigError as exc:
                problem(dotted, str(exc))
                continue
            found = field_problem(dotted, coerced)
            if found:
                problem(dotted, found)
                continue
            out[key][k] = coerced
    return checked


def combine_problems(problems: list[PerfModelError], source: str) -> PerfModelError:
    """One error for every problem found: the problem itself when there is one; else a ConfigError
    that lists them all, on one line when they fit in ~300 characters ("N problems in SOURCE: a;
    b"), else as a first line "N problems in SOURCE:" followed by one line each."""
    if len(problems) == 1:
        return problems[0]
    lines = [str(p).splitlines()[0] if str(p) else type(p).__name__ for p in problems]
    head = f"{len(lines)} problems in {source}"
    single = f"{head}: {'; '.join(lines)}"
    message = single if len(single) <= 300 else head + ":\n" + "\n".join(f"  - {line}" for line in lines)
    return ConfigError(message, problems=lines)


def _has_dims(m: dict[str, Any]) -> bool:
    arch = m.get("arch", "decoder")
    if arch == "gbm":
        return True
    if arch in ("decoder", "encoder", "encoder-decoder"):
        return all(k in m for k in ("hidden_size", "num_layers", "num_heads"))
    return "params_total" in m and "forward_gflops_per_sample" in m


def resolve_model(m: dict[str, Any], base_dir: Path | None) -> tuple[ModelSpec, list[str]]:
    """Catalog entry (model.name or model.path) with explicit dims on top, or a custom model; and
    the assumption lines of the resolution. Paths are relative to `base_dir` (the config's folder)."""
    fields = {k: v for k, v in m.items() if k not in ("name", "path")}
    name, path = m.get("name"), m.get("path")
    notes: list[str] = []
    base: ModelSpec | None = None
    if path is not None:
        p = Path(path).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        found = local_config_path(str(p))
        if found is None:
            what = "holds no config.json" if p.is_dir() else "does not exist" if not p.exists() else "is not a .json file"
            raise ConfigError(f"model.path {clip(str(p))} {what} (give a Hugging Face config.json or its folder)")
        base = model_from_hf_config(found)
    elif name is not None:
        try:
            base = get_model(name, base_dir=base_dir)
        except CatalogError:
            if not _has_dims(fields):
                raise
        if base is not None and base.source.startswith("Hugging Face config.json of"):
            notes.append(f"model.name {name}: not in the catalog; dimensions read from {base.source}")
    elif not fields:
        raise ConfigError(
            "model.name is required: a catalog name (`perfmodel models` lists them), timm/<name> or a Hugging Face id; "
            "or give model.hidden_size, model.num_layers and model.num_heads (or model.path to a config.json)"
        )
    if base is None:
        spec = ModelSpec(name=name or "custom", **fields)
        if spec.is_transformer and "gated_mlp" not in fields:
            notes.append("model.gated_mlp not given: assumed false (a 2-matrix MLP, GPT/BERT style; set "
                         "model.gated_mlp: true for SwiGLU/GeGLU models such as Llama, Mistral or Qwen)")
        return spec, notes
    if name is not None and path is not None:
        fields["name"] = name
    if any(k in fields for k in _DIM_KEYS) and "params_total" not in fields and base.is_transformer:
        fields["params_total"] = None  # a catalog total no longer matches changed dims
    return (dataclasses.replace(base, **fields) if fields else base), notes


def workload_to_native(w: Workload) -> dict[str, Any]:
    """The resolved native config of a workload (every field explicit): loading it again gives the
    same workload. For recording next to a prediction (MLflow params, --json)."""
    model = {
        k: v
        for k, v in dataclasses.asdict(w.model).items()
        if v is not None and not (k.startswith("part_") and not w.model.part_layers)
    }  # the part_* fields only for a model with a transformer part (their defaults otherwise)
    training = {k: v for k, v in dataclasses.asdict(w.training).items() if v is not None}
    hardware = {"gpu": w.gpu.name, **dataclasses.asdict(w.parallel)}
    return {"model": model, "training": training, "hardware": hardware, "framework": _framework_value(w)}


def _framework_value(w: Workload) -> Any:
    """The workload's `framework:` as a config says it: the name, or the whole recipe when it is a
    custom one (so that reading it back gives the same recipe)."""
    if w.recipe is None or resolve_framework(w.framework)[1] == w.recipe:
        return w.framework
    fields = dataclasses.asdict(w.recipe)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items() if k not in ("aliases", "sources")}
