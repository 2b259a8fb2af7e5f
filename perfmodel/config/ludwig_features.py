"""Reading a Ludwig config, once: `read_ludwig(cfg)` checks the raw dict (perfmodel's rules for
what Ludwig 0.17 accepts, then the shape of every section the translation reads) and returns a
frozen `LudwigConfig` with Ludwig's defaults resolved; the mappers (ludwig.py, ludwig_trainer.py,
ludwig_ecd.py) read that record and never the raw dict.

A feature ends up with its encoder and preprocessing from the feature, then `defaults:`, then the
legacy top-level per-type `preprocessing:`, then Ludwig's type default. A bare string encoder
(legacy) takes its parameters from the feature itself. Also here: LoRA adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from perfmodel.config.ludwig_defaults import LudwigDefaults, defaults_for, pinned_defaults
from perfmodel.config.ludwig_schema import LudwigVerdict, own_verdict, refusal_message
from perfmodel.config.native import Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote

DETECT_KEYS = (
    "model_type",
    "input_features",
    "output_features",
    "trainer",
    "backend",
    "combiner",
    "base_model",
)
"""A config is Ludwig's when it has any of these keys."""
TYPE_DEFAULT_ENCODER = {
    "text": "parallel_cnn",
    "sequence": "embed",
    "timeseries": "parallel_cnn",
    "image": "stacked_cnn",
    "category": "dense",
    "number": "passthrough",
    "binary": "passthrough",
    "set": "embed",
    "bag": "embed",
    "date": "embed",
    "h3": "embed",
    "vector": "dense",
    "audio": "parallel_cnn",
}
"""Ludwig's default encoder per input feature type."""
_FEATURE_KEYS = {
    "name",
    "type",
    "column",
    "proc_column",
    "preprocessing",
    "encoder",
    "decoder",
    "tied",
    "loss",
}
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class LudwigFeature:
    """One input or output feature, with what it ends up with in Ludwig."""

    index: int
    """Its position in input_features / output_features."""
    output: bool
    """True for an output feature."""
    name: str
    """Its name as written (as text)."""
    where: str
    """How messages name it: 'input_features[0] (age)'."""
    type: str
    """Its type, lower-cased (`type_given`: as written)."""
    type_given: str
    column: str
    """The dataset column it reads (`column`, else its name)."""
    spec: Mapping[str, Any]
    """The feature as written (num_classes, tied, ...)."""
    preprocessing: Mapping[str, Any]
    """The config's preprocessing of it: legacy top-level per type, then `defaults:`, then its own."""
    ludwig_preprocessing: Mapping[str, Any]
    """`preprocessing` over Ludwig's defaults for its type."""
    encoder: str = ""
    """Its encoder type (given, or Ludwig's type default); '' for outputs and non-ECD models."""
    encoder_params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Its encoder's parameters: Ludwig's defaults, then `defaults:`, then its own."""
    encoder_given: frozenset[str] = frozenset()
    """The encoder keys the config wrote for this feature itself."""


@dataclass(frozen=True, kw_only=True)
class LudwigSplit:
    """Ludwig's train / validation / test split of the dataset rows."""

    train_fraction: float
    """The training share of the (sampled) rows."""
    sample_ratio: float
    """The share of the dataset rows Ludwig keeps (preprocessing.sample_ratio, default 1)."""
    how: str
    """Where the split came from (for the assumption lines)."""


@dataclass(frozen=True, kw_only=True)
class LudwigConfig:
    """A Ludwig config read and checked once, Ludwig's defaults resolved (`read_ludwig`)."""

    model_type: Literal["ecd", "llm", "gbm"]
    """Which translation applies (model_type, default ecd; gbm: LightGBM, Ludwig <= 0.10)."""
    verdict: LudwigVerdict
    """perfmodel's rules on the config: valid, or refused for `model_type: gbm` only."""
    inputs: tuple[LudwigFeature, ...]
    """input_features, in order (gbm: without encoder or preprocessing: only their count is read)."""
    outputs: tuple[LudwigFeature, ...]
    """output_features, in order."""
    trainer: Mapping[str, Any]
    """The trainer section (the legacy `training:` when there is no `trainer:`)."""
    trainer_path: str
    """'trainer' or 'training': how messages name that section."""
    preprocessing: Mapping[str, Any]
    """The global preprocessing section."""
    split: LudwigSplit
    combiner: Mapping[str, Any]
    """ECD: the combiner section, Ludwig's default when not given; {} otherwise."""
    combiner_line: str | None
    """The assumption line when Ludwig chose the combiner."""
    prompt_template: str
    """LLM: prompt.template ('' when not given)."""
    base_model: str | None
    """LLM: base_model as text (None when not given)."""
    is_multimodal: bool
    """is_multimodal: true (refused: vision-language fine-tuning is not modelled)."""
    adapter: Any
    """The top-level adapter as written (apply_adapter checks it)."""
    quantization: Any
    """The quantization section as written (None when absent)."""
    backend: Any
    """The backend as written (map_backend checks it)."""
    defaults: LudwigDefaults
    """Where Ludwig's defaults come from (the pinned table, or Ludwig's own resolution)."""


def read_ludwig(cfg: dict[str, Any]) -> LudwigConfig:
    """The config as Ludwig reads it, checked once: a ConfigError naming the dotted key for a
    section of the wrong shape, Ludwig's reason for a config Ludwig 0.17 rejects (perfmodel's
    rules; `model_type: gbm` passes, predicted as Ludwig <= 0.10 trained it)."""
    for key in ("model", "hardware", "framework"):
        if key in cfg:
            raise ConfigError(
                f"{quote(key)} is not a Ludwig key and this file is a Ludwig config (it has "
                f"{', '.join(k for k in DETECT_KEYS if k in cfg)}): give hardware with --gpu/--num-gpus "
                f"or --set hardware.gpu=NAME, or write a native config"
            )
    if "training" in cfg and "trainer" not in cfg:  # legacy name of the section
        trainer, tpath = section(cfg, "training", "training"), "training"
    else:
        trainer, tpath = section(cfg, "trainer", "trainer"), "trainer"
    verdict = own_verdict(cfg)
    if verdict.valid is False and not verdict.is_gbm:
        raise ConfigError(refusal_message(verdict))
    model_type: Literal["ecd", "llm", "gbm"] = (
        "gbm"
        if verdict.is_gbm
        else ("llm" if str(cfg.get("model_type") or "ecd").lower() == "llm" else "ecd")
    )
    raw_inputs, raw_outputs = features(cfg, "input_features"), features(cfg, "output_features")
    pre = section(cfg, "preprocessing", "preprocessing")
    split = _split(pre)
    defaults = pinned_defaults() if model_type == "gbm" else defaults_for(cfg)
    if model_type == "gbm":  # LightGBM: the features' count only
        inputs = tuple(_bare(i, f, False) for i, f in enumerate(raw_inputs))
        outputs = tuple(_bare(i, f, True) for i, f in enumerate(raw_outputs))
    else:
        by_type = _TypeSections(pre, section(cfg, "defaults", "defaults"))
        inputs = tuple(_feature(by_type, model_type, i, f, False, defaults) for i, f in enumerate(raw_inputs))
        outputs = tuple(
            _feature(by_type, model_type, i, f, True, defaults) for i, f in enumerate(raw_outputs)
        )
    combiner, line = _EMPTY, None
    if model_type == "ecd":
        section(cfg, "combiner", "combiner")
        given, line = defaults.combiner(cfg)
        combiner = MappingProxyType(dict(given))
    template = ""
    if model_type == "llm":
        template = str(section(cfg, "prompt", "prompt").get("template") or "")
    base = cfg.get("base_model")
    return LudwigConfig(
        model_type=model_type,
        verdict=verdict,
        inputs=inputs,
        outputs=outputs,
        trainer=MappingProxyType(trainer),
        trainer_path=tpath,
        preprocessing=MappingProxyType(pre),
        split=split,
        combiner=combiner,
        combiner_line=line,
        prompt_template=template,
        base_model=str(base) if base else None,
        is_multimodal=bool(cfg.get("is_multimodal")),
        adapter=cfg.get("adapter"),
        quantization=cfg.get("quantization"),
        backend=cfg.get("backend"),
        defaults=defaults,
    )


def _split(pre: dict[str, Any]) -> LudwigSplit:
    split = section(pre, "split", "preprocessing.split")
    probs = split.get("probabilities") or pre.get("split_probabilities")
    ratio = float(pre.get("sample_ratio") or 1.0)
    if isinstance(probs, list) and probs:
        return LudwigSplit(
            train_fraction=float(probs[0]),
            sample_ratio=ratio,
            how=f"preprocessing.split probabilities {probs}",
        )
    if str(split.get("type", "random")) == "fixed":
        how = "preprocessing.split is fixed (the data's split column decides): assumed 70% training rows"
        return LudwigSplit(train_fraction=0.7, sample_ratio=ratio, how=how)
    return LudwigSplit(
        train_fraction=0.7, sample_ratio=ratio, how="Ludwig's default random split 0.7/0.1/0.2"
    )


class _TypeSections:
    """The per-type sections of the config (legacy `preprocessing.<type>`, `defaults.<type>.encoder`,
    `defaults.<type>.preprocessing`), each checked once, when a feature of that type needs it."""

    def __init__(self, preprocessing: dict[str, Any], defaults: dict[str, Any]) -> None:
        self._pre, self._defaults = preprocessing, defaults
        self._seen: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, ftype: str, part: str) -> dict[str, Any]:
        key = (ftype, part)
        if key not in self._seen:
            if part == "legacy":
                self._seen[key] = section(self._pre, ftype, f"preprocessing.{ftype}")
            elif part == "type":
                self._seen[key] = section(self._defaults, ftype, f"defaults.{ftype}")
            else:
                self._seen[key] = section(self.get(ftype, "type"), part, f"defaults.{ftype}.{part}")
        return self._seen[key]


def _bare(i: int, f: dict[str, Any], output: bool) -> LudwigFeature:
    name = str(f["name"])
    return LudwigFeature(
        index=i,
        output=output,
        name=name,
        where=f"{'output' if output else 'input'}_features[{i}] ({name})",
        type=str(f["type"]).lower(),
        type_given=str(f["type"]),
        column=column(f),
        spec=MappingProxyType(f),
        preprocessing=_EMPTY,
        ludwig_preprocessing=_EMPTY,
    )


def _feature(
    by_type: _TypeSections, model_type: str, i: int, f: dict[str, Any], output: bool, defaults: LudwigDefaults
) -> LudwigFeature:
    bare = _bare(i, f, output)
    ftype = bare.type
    encoder: dict[str, Any] = {}
    if model_type == "ecd" and not output:
        kind, params, own = _encoder_of(f, ftype, by_type.get(ftype, "encoder"))
        encoder = {
            "encoder": kind,
            "encoder_params": MappingProxyType({**defaults.encoder(i, ftype, kind), **params}),
            "encoder_given": frozenset(own),
        }
    pre = {
        **by_type.get(ftype, "legacy"),
        **by_type.get(ftype, "preprocessing"),
        **section(f, "preprocessing", f"{f['name']}.preprocessing"),
    }
    ludwig = defaults.preprocessing(ftype, output=output, llm=model_type == "llm")
    return replace(
        bare,
        **encoder,
        preprocessing=MappingProxyType(pre),
        ludwig_preprocessing=MappingProxyType({**ludwig, **pre}),
    )


# --- the raw dict's shape (read_ludwig only) -------------------------------------------------------


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
        raise ConfigError(
            f"{key} is required in a Ludwig config: a list of features, each with a name and a type"
        )
    for i, f in enumerate(value):
        if not isinstance(f, dict) or "name" not in f or "type" not in f:
            raise ConfigError(f"{key}[{i}] must be a mapping with a name and a type, got {quote(f)}")
    return value


def column(f: dict[str, Any]) -> str:
    return str(f.get("column") or f["name"])


def _encoder_of(
    f: dict[str, Any], ftype: str, defaults: dict[str, Any]
) -> tuple[str, dict[str, Any], set[str]]:
    """(encoder type, parameters, keys the user wrote) from the feature, `defaults.<type>.encoder`
    and Ludwig's type default. A bare string encoder (legacy) takes its parameters from the feature."""
    enc = f.get("encoder")
    flat = {k: v for k, v in f.items() if k not in _FEATURE_KEYS}
    if isinstance(enc, dict):
        own = {**flat, **enc}
    else:
        own = dict(flat)
        if enc is not None:
            own["type"] = str(enc)
    params = {**defaults, **own}
    kind = str(params.pop("type", None) or TYPE_DEFAULT_ENCODER.get(ftype, "")).lower()
    return kind, params, set(own)


def apply_adapter(draft: Draft, adapter: Any, path: str) -> bool:
    """LoRA-style adapters -> training.lora_r (+ lora_target_modules); False when no adapter."""
    if not adapter:
        return False
    spec = {"type": adapter} if isinstance(adapter, str) else adapter
    if not isinstance(spec, dict):
        raise ConfigError(f"{path} must be an adapter type or a mapping, got {quote(adapter)}")
    kind = str(spec.get("type", "lora")).lower()
    if kind not in ("lora", "adalora", "qlora"):
        raise UnsupportedError(
            f"{path}.type {kind} is not supported: perfmodel models LoRA adapters (lora, adalora; quantization.bits for QLoRA)"
        )
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
