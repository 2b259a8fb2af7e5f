"""The catalogs as pure data: one YAML file per accelerator (`gpus/`) and per model architecture
(`models/`), with the source of each number. The file name is the key users type.

Files are read lazily (on the first lookup, never at import) and cached for the process. They are
the package's own files, not user input: PyYAML's libyaml SafeLoader reads them (0.06 s for all 133
on a 2-core host, against 0.5 s through the bounded pure-Python loader that user configs go
through: a third of a cold `perfmodel predict`). This module knows names and entries only; the lookups
that build specs (and add the local CPU, measured hosts and Hugging Face configs) live in
hardware.py and models.py.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from perfmodel.errors import CatalogError, quote

CATALOG_DIR = Path(__file__).parent
"""Folder of the catalog files."""

MAX_SUGGESTIONS = 8
"""Most names an unknown-name error suggests."""


def norm(name: str) -> str:
    """The form names are compared in: lower case, '_' and ' ' as '-'."""
    return str(name).strip().lower().replace("_", "-").replace(" ", "-")


def _read(path: Path) -> dict[str, Any]:
    # PyYAML: only when a catalog is first read (as perfmodel.safe_yaml), not on `import perfmodel.cli`
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML has it: same results
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path}: unreadable catalog file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: a catalog file must hold a mapping")
    return data


@functools.cache
def gpu_entries() -> dict[str, dict[str, Any]]:
    """Catalog key -> raw mapping of every accelerator file."""
    return {p.stem: _read(p) for p in sorted((CATALOG_DIR / "gpus").glob("*.yaml"))}


@functools.cache
def model_entries() -> dict[str, dict[str, Any]]:
    """Catalog key -> raw mapping of every model-architecture file."""
    return {p.stem: _read(p) for p in sorted((CATALOG_DIR / "models").glob("*.yaml"))}


@functools.cache
def gpu_index() -> dict[str, str]:
    """Normalised key or alias -> accelerator key."""
    index: dict[str, str] = {}
    for key, entry in gpu_entries().items():
        for alias in [key, *entry.get("aliases", [])]:
            index[norm(str(alias))] = key
    return index


@functools.cache
def model_index() -> dict[str, str]:
    """Normalised key, alias or Hugging Face id -> model key."""
    index: dict[str, str] = {}
    for key, entry in model_entries().items():
        for alias in [key, entry.get("hf_id") or key, *entry.get("aliases", [])]:
            index[norm(str(alias))] = key
    return index


def suggestions(name: str, choices: Iterable[str]) -> list[str]:
    """Names to suggest for an unknown `name`: first every choice that starts with what was typed,
    then every one that contains it (the family: 'A100' -> A100-40GB, A100-80GB, ...), then
    difflib's close matches; at most MAX_SUGGESTIONS."""
    typed = norm(name)
    by_norm = {norm(c): c for c in choices}
    family: list[str] = []
    if len(typed) >= 2:
        family = [c for n, c in by_norm.items() if n.startswith(typed)]
        family += [c for n, c in by_norm.items() if typed in n and c not in family]
    close = [by_norm[n] for n in difflib.get_close_matches(typed, list(by_norm), n=3, cutoff=0.5)]
    return list(dict.fromkeys([*family, *close]))[:MAX_SUGGESTIONS]


def unknown_name(kind: str, name: str, choices: Iterable[str], hint: str) -> CatalogError:
    """The error for an unknown catalog name, with suggestions and how to find the names."""
    found = suggestions(name, choices)
    suggestion = f"; did you mean {', '.join(found)}?" if found else ""
    return CatalogError(f"unknown {kind} {quote(str(name))}{suggestion} {hint}")
