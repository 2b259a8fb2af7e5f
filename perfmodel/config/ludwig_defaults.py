"""Ludwig's defaults as Ludwig 0.17 resolves them: from the installed Ludwig's resolved config of the
very config when asked for (and available), else the table pinned to Ludwig 0.17.10
(ludwig_defaults_0_17.json, package data: every value read back from Ludwig itself).

    defaults_for(cfg) -> LudwigDefaults
    pinned_defaults() -> LudwigDefaults   (the table only)

Ludwig's own resolution is used when `ludwig` is already imported in this process (no cost: e.g.
perfmodel's Ludwig callback inside a training) or when PERFMODEL_LUDWIG_RESOLVE=1 (this interpreter,
else the Ludwig venv: ~10 s per config). The combiner rule (ludwig/schema/model_types/base.py:
ModelConfig.from_dict): with no `combiner:` section, an ECD model with >= 3 input features gets
`ft_transformer` (1 layer, hidden 256, 8 heads), otherwise `concat`.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.config.ludwig_schema import check_ludwig

ENV_RESOLVE = "PERFMODEL_LUDWIG_RESOLVE"
TABLE_FILE = Path(__file__).with_name("ludwig_defaults_0_17.json")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The pinned table (read once)."""
    data: dict[str, Any] = json.loads(TABLE_FILE.read_text())
    return data


@dataclass(frozen=True)
class LudwigDefaults:
    """Where each default comes from for one config: Ludwig's resolved config, else the table."""

    resolved: dict[str, Any] | None
    """Ludwig's ModelConfig.to_dict() of this config, or None (the table)."""
    source: str
    """'Ludwig 0.17.10 (installed)' or "perfmodel's table of Ludwig 0.17.10 defaults"."""

    @property
    def version(self) -> str:
        return str(table()["ludwig_version"])

    def combiner(self, cfg: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the combiner section, the assumption line when Ludwig chose it)."""
        given = cfg.get("combiner")
        if isinstance(given, dict):
            return given, None
        n = len(cfg.get("input_features") or [])
        if self.resolved is not None:
            section = dict(self.resolved.get("combiner") or {})
        else:
            rules = table()["combiner"]
            section = dict(
                rules["3_inputs_no_combiner_section" if n >= 3 else "1_inputs_no_combiner_section"]
            )
        why = ">= 3 input features" if n >= 3 else "fewer than 3 input features"
        line = (
            f"combiner not given: Ludwig {self.version} builds {section.get('type')} ({why}; "
            + (
                f"{section.get('num_layers')} layer, hidden {section.get('hidden_size')}, {section.get('num_heads')} heads"
                if section.get("type") == "ft_transformer"
                else f"output {section.get('output_size')}, no FC layers"
            )
            + f") [{self.source}]"
        )
        return section, line

    def encoder(self, index: int, ftype: str, kind: str) -> dict[str, Any]:
        """Ludwig's defaults of input feature `index`'s encoder (type `kind`); {} when unknown."""
        if self.resolved is not None:
            feats = self.resolved.get("input_features") or []
            enc = (
                feats[index].get("encoder") if index < len(feats) and isinstance(feats[index], dict) else None
            )
            if isinstance(enc, dict) and str(enc.get("type")) == kind:
                return {k: v for k, v in enc.items() if k != "type" and v is not None}
            return {}
        entry = table()["features"]["input"].get(ftype, {}).get("encoder", {})
        if str(entry.get("type")) != kind:
            return {}
        return {k: v for k, v in entry.items() if k != "type" and v is not None}

    def preprocessing(self, ftype: str, *, output: bool = False, llm: bool = False) -> dict[str, Any]:
        """Ludwig's preprocessing defaults of a feature type."""
        t = table()
        if llm and ftype == "text":
            return dict(t["llm_text_preprocessing"]["output" if output else "input"])
        return dict(t["features"]["output" if output else "input"].get(ftype, {}).get("preprocessing", {}))

    def trainer(self, model_type: str) -> dict[str, Any]:
        """Ludwig's trainer defaults (ECD, or LLM fine-tuning)."""
        if self.resolved is not None and isinstance(self.resolved.get("trainer"), dict):
            return dict(self.resolved["trainer"])
        return dict(table()["trainer"]["llm_finetune" if model_type == "llm" else "ecd"])

    def split(self) -> list[float]:
        return list(table()["preprocessing"]["global"]["split"]["probabilities"])


def pinned_defaults() -> LudwigDefaults:
    """The table pinned to Ludwig 0.17.10 (no Ludwig asked)."""
    return LudwigDefaults(resolved=None, source=f"perfmodel's table of Ludwig {table()['ludwig_version']} defaults")


def defaults_for(cfg: dict[str, Any]) -> LudwigDefaults:
    """Ludwig's own resolution of `cfg` when asked for and available (see the module doc), else the table."""
    pinned = pinned_defaults()
    if "ludwig" not in sys.modules and os.environ.get(ENV_RESOLVE, "") not in ("1", "true", "yes"):
        return pinned
    try:
        verdict = check_ludwig(cfg, use_ludwig="auto")
    except Exception:  # noqa: BLE001 - a broken Ludwig install must not stop a prediction: the table
        return pinned
    if verdict.resolved is None:
        return pinned
    return LudwigDefaults(
        resolved=verdict.resolved, source=f"Ludwig {verdict.ludwig_version} ({verdict.judge})"
    )
