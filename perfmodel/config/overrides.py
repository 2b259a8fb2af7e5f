"""Reading a YAML config file and applying `--set dotted.key=value` overrides.

Every failure is a one-line `ConfigError` that names the file or the override.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping held by a YAML file; ConfigError if missing, a directory, unreadable, not YAML,
    empty or not a mapping."""
    import yaml

    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"config file {p} does not exist")
    if p.is_dir():
        raise ConfigError(f"config path {p} is a directory; give a YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {p}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{p} is not valid YAML{where}: {problem}") from exc
    if data is None:
        raise ConfigError(f"config file {p} is empty")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{p} must hold a mapping (native sections model/training/hardware, or a Ludwig config), "
            f"got a {type(data).__name__}"
        )
    return data


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """`'training.micro_batch_size=16'` -> (('training', 'micro_batch_size'), 16). The value is read as
    a YAML scalar (so `16` is an int, `true` a bool, `null` unsets the key)."""
    import yaml

    if "=" not in text:
        raise ConfigError(f"--set {text!r} must look like section.key=value, e.g. training.micro_batch_size=16")
    key, raw = text.split("=", 1)
    parts = tuple(p.strip() for p in key.strip().split("."))
    if any(not p for p in parts):
        raise ConfigError(
            f"--set {text!r}: the key must be a dotted path such as training.micro_batch_size or hardware.gpu"
        )
    if not raw.strip():
        raise ConfigError(f"--set {text!r} has no value; write {key.strip()}=null to unset the key")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {text!r}: the value is not a YAML scalar ({exc.__class__.__name__})") from exc
    return parts, value


def set_path(config: dict[str, Any], parts: Sequence[str], value: Any, *, origin: str = "") -> None:
    """Set config[a][b]... = value, creating sections; None removes the key."""
    node = config
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(f"{origin or '.'.join(parts)}: {where} is not a section")
        node = child
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def deep_copy(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy whose nested dicts and lists can be changed freely."""
    import copy

    return copy.deepcopy(dict(config))
