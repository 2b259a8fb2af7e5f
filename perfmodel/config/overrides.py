"""Reading a YAML config file and applying `--set dotted.key=value` overrides.

Every failure is a one-line `ConfigError` that names the file or the override.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError, clip, quote
from perfmodel.safe_yaml import load_yaml_text, read_yaml_file

_PLAIN_INT = re.compile(r"0|-?[1-9][0-9]{0,17}")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_YAML_WORDS = frozenset("yes no true false on off null y n ~".split())
"""Words YAML 1.1 reads as bools or null (compared lower-cased): these go through the loader."""
_NOT_PLAIN: Any = object()


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping held by a YAML file, read through the bounded loader (perfmodel/safe_yaml.py);
    ConfigError if missing, not a regular file, too large, not YAML, has a duplicate key, empty or
    not a mapping."""
    p = Path(path).expanduser()
    data = read_yaml_file(p, what="config file")
    if data is None:
        raise ConfigError(f"config file {clip(str(p))} is empty")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{clip(str(p))} must hold a mapping (native sections model/training/hardware, or a Ludwig "
            f"config), got a {type(data).__name__}"
        )
    return data


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """`'training.micro_batch_size=16'` -> (('training', 'micro_batch_size'), 16). The value is read as
    a YAML scalar through the bounded loader (so `16` is an int, `true` a bool, `null` unsets the
    key, `[a, b]` a list)."""
    shown = quote(text)
    if "=" not in text:
        raise ConfigError(f"--set {shown} must look like section.key=value, e.g. training.micro_batch_size=16")
    key, raw = text.split("=", 1)
    parts = key_parts(key)
    if any(not p for p in parts):
        raise ConfigError(
            f"--set {shown}: the key must be a dotted path such as training.micro_batch_size or hardware.gpu"
        )
    if not raw.strip():
        raise ConfigError(f"--set {shown} has no value; write {clip(key.strip())}=null to unset the key")
    value = parse_value(raw, source=f"--set {shown}")
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
        raise ConfigError(f"--set {shown}: the value must be a number, a word, true/false, null or a list of words")
    return parts, value


def key_parts(key: str) -> tuple[str, ...]:
    """The parts of a dotted `--set` key as the override parser reads them: split on '.', each
    part stripped of whitespace (`' model. path '` -> ('model', 'path')); an empty part stays ''
    (the caller's error). Anything that checks a key before it is applied must read it this way."""
    return tuple(p.strip() for p in key.strip().split("."))


def parse_value(raw: str, *, source: str) -> Any:
    """A command-line value (`--set`, `--vary`) read as YAML, except that numbers are decimal:
    `017`, `0x100`, `0b11`, `0o17` and `1:30` are a ConfigError naming `source` (a config file
    keeps YAML's own reading)."""
    value = _plain_scalar(raw)
    if value is _NOT_PLAIN:
        value = load_yaml_text(raw, source=source, decimal_numbers=True)
    return value


def _plain_scalar(raw: str) -> Any:
    """The value YAML gives a plain decimal integer or a plain word (`16`, `fsdp`, `A100-80GB`),
    without starting the loader (a service reads three per request); _NOT_PLAIN for anything else."""
    text = raw.strip()
    if _PLAIN_INT.fullmatch(text):
        return int(text)
    if _PLAIN_WORD.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return _NOT_PLAIN


def set_path(config: dict[str, Any], parts: Sequence[str], value: Any, *, origin: str = "") -> None:
    """Set config[a][b]... = value, creating sections; None removes the key."""
    node = config
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(f"{origin or quote('.'.join(parts))}: {where} is not a section")
        node = child
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def deep_copy(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy whose nested dicts and lists can be changed freely."""
    return copy.deepcopy(dict(config))
