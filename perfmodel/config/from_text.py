"""Configs that are not files: YAML text (a request body, a notebook cell). Nothing is written to
disk; the text goes through the one bounded YAML loader (`safe_yaml.load_yaml_text`: alias bombs,
nesting, duplicate keys), and the mapping through the same resolution as a file
(`perfmodel.config.resolve_workload`, which takes the text in a `RunRequest`).

    parse_config_text("model: {name: llama2-7b}\\n...")        -> dict
"""

from __future__ import annotations

from typing import Any

from perfmodel.errors import ConfigError
from perfmodel.safe_yaml import load_yaml_text

MAX_TEXT_CHARS = 1_000_000
"""Longest config text parsed (characters; the same bound as a config file's bytes)."""


def parse_config_text(text: str, *, source: str = "the config text") -> dict[str, Any]:
    """The mapping a YAML (or JSON) document holds; ConfigError, naming `source`, when it is too
    long, not YAML, has a duplicate key, is empty or is not a mapping."""
    if not isinstance(text, str):
        raise ConfigError(f"{source} must be YAML text, got a {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigError(f"{source} is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
    data = load_yaml_text(text, source=source)
    if data is None:
        raise ConfigError(f"{source} is empty")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source} must hold a mapping (native sections model/training/hardware, or a Ludwig "
            f"config), got a {type(data).__name__}"
        )
    return data
