"""`advise --write FILE`: the chosen option written as a config in the user's own dialect.

The user's file is read again as written (its comments are not kept), the option's changes are
set in its own keys, and the result is dumped as YAML:
  * native: native dotted keys; where the `training` section spells a setting with a Hugging Face
    `TrainingArguments` key (`per_device_train_batch_size`, `gradient_accumulation_steps`,
    `gradient_checkpointing`, the `bf16` / `fp16` switches), that key is written instead, so the
    file keeps one spelling per setting; the run's `--set` / `--gpu` / `--num-gpus` options are
    written into the file too;
  * Ludwig: the option's Ludwig keys (`trainer.*`, `backend.*`, `quantization.*`); what a Ludwig
    config cannot hold (the accelerator, the node count) is listed in the header as the perfmodel
    flags that give it.
Reading the file back (with those flags) gives the option's run: `tests/test_decide_write.py`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from perfmodel.config.hf_args import RENAMES
from perfmodel.config.source import ConfigSource, set_dotted
from perfmodel.errors import ConfigError

_HF_PRECISION = {"amp_bf16": {"bf16": True, "fp16": False}, "amp_fp16": {"fp16": True, "bf16": False}}
"""Native precision -> Hugging Face switches, for a training section written with them."""


def _native_key(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """{key: value} in the spelling the file uses for it (a Hugging Face key where it uses one)."""
    section_value = raw.get("training")
    training: dict[str, Any] = section_value if isinstance(section_value, dict) else {}
    section, _, name = key.partition(".")
    if section != "training":
        return {key: value}
    for hf, native in RENAMES.items():
        if native == name and hf in training:
            return {f"training.{hf}": value}
    if name == "precision" and any(k in training for k in ("bf16", "fp16")):
        if value in _HF_PRECISION:
            return {f"training.{k}": v for k, v in _HF_PRECISION[value].items()}
        return {"training.precision": value, "training.bf16": None, "training.fp16": None}
    return {key: value}


def option_config(source: ConfigSource, option: Any) -> tuple[dict[str, Any], list[str]]:
    """(the config of `option` in `source`'s dialect, perfmodel flags it still needs)."""
    raw = copy.deepcopy(source.raw)
    flags: list[str] = []
    native = source.dialect == "native"
    for setting in source.settings:  # the run's own --set / --gpu options
        key = ".".join(setting.parts)
        if native:
            for k, v in _native_key(raw, key, setting.value).items():
                set_dotted(raw, k, v)
        else:
            flags.append(f"--set {key}={setting.value}")
    for change in option.changes:
        if change.flag:
            flags.append(change.flag)
            continue
        items = _native_key(raw, change.key, change.new) if native else {change.key: change.new}
        for k, v in items.items():
            set_dotted(raw, k, v)
    return raw, list(dict.fromkeys(flags))


def write_option(source: ConfigSource, option: Any, path: str | Path, confidence: float) -> Path:
    """Write `option` as a config to `path` (.yaml / .yml) with a header saying what it is."""
    # PyYAML: only when a file is written
    import yaml

    where = Path(path)
    if where.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"--write {where}: the file must end in .yaml or .yml")
    if not where.parent.exists():
        raise ConfigError(f"--write {where}: folder {where.parent} does not exist")
    raw, flags = option_config(source, option)
    o = option.outcome
    lines = [
        f"# written by perfmodel advise from {source.label}: {option.label}",
        f"# predicted total time {o.total_time_s.estimate / 3600:.3g} h "
        f"({o.total_time_s.low / 3600:.3g}-{o.total_time_s.high / 3600:.3g} h at {confidence:.0%})",
    ]
    if flags:
        lines.append(f"# not a {source.dialect} key; give it to perfmodel: {' '.join(flags)}")
    body = yaml.safe_dump(raw, sort_keys=False, default_flow_style=False)
    where.write_text("\n".join(lines) + "\n" + body)
    return where
