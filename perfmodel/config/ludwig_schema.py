"""Is this a config Ludwig accepts? Ludwig's own verdict when Ludwig is at hand, else perfmodel's
rules, which agree with Ludwig 0.17.10 on every config in the shared folder (tests/test_config_ludwig.py).

    own_verdict(cfg)                      -> LudwigVerdict   (no Ludwig needed, instant)
    check_ludwig(cfg, use_ludwig="auto")  -> LudwigVerdict   (Ludwig's ModelConfig when found)

Ludwig's validator is `ludwig.schema.model_types.base.ModelConfig.from_dict`, the call
`LudwigModel.__init__` makes: it upgrades old keys, adds the default combiner, merges defaults,
checks the JSON schema (ludwig/config_validation/validation.py: check_schema), builds the pydantic
config and runs the registered checks (ludwig/config_validation/checks.py). perfmodel's rules
mirror what of that decides the configs people write (names are Ludwig's functions):

  model type       model_type must be ecd or llm (ModelConfig.from_dict; `gbm` was removed after
                   Ludwig 0.10: perfmodel still predicts it, with a warning)
  schema           llm input features are text only; no `adapter` inside an ECD encoder
  checks.py        check_feature_names_unique, check_tied_features_valid, check_training_runway,
                   check_llm_finetuning_output_feature_config, check_llm_finetuning_trainer_config,
                   check_llm_text_encoder_is_not_used_with_ecd, check_qlora_requirements,
                   check_llm_quantization_backend_incompatibility, check_sample_ratio_and_size_compatible
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass, replace
from typing import Any

from perfmodel.config.ludwig_venv import (
    LUDWIG_VERSION_PINNED,
    ludwig_in_process,
    ludwig_python,
    require_ludwig_python,
)
from perfmodel.errors import ConfigError, quote

LAST_GBM_LUDWIG = "0.10"
"""The last Ludwig release with `model_type: gbm` (LightGBM models); 0.11+ accepts ecd and llm only."""
OWN_RULES = f"perfmodel's rules for Ludwig {LUDWIG_VERSION_PINNED}"
INPUT_TYPES = frozenset(
    "audio bag binary category date h3 image number sequence set text timeseries vector".split()
)
"""Ludwig 0.17.10's input feature types (its JSON schema's enum for input_features[].type)."""
_HF_ENCODERS = (
    "bert",
    "distilbert",
    "roberta",
    "t5",
    "mt5",
    "gpt2",
    "gpt",
    "albert",
    "xlmroberta",
    "electra",
    "camembert",
    "longformer",
    "xlnet",
    "flaubert",
    "ctrl",
    "transformer_xl",
    "xlm",
    "deberta",
    "auto_transformer",
    "llm",
)
"""Text encoders with a `pretrained_model_name_or_path` (ludwig/schema/encoders/text_encoders.py)."""
_HUB_MARKERS = (
    "offline",
    "huggingface.co",
    "couldn't connect",
    "can't load",
    "not a local folder",
    "is not a valid model identifier",
    "localentrynotfound",
)


@dataclass(frozen=True, kw_only=True)
class LudwigVerdict:
    """Whether Ludwig accepts a config, and who said so."""

    valid: bool | None
    """True / False; None when Ludwig could not decide (a base model it could not reach offline)."""
    reason: str = ""
    """Ludwig's reason for a refusal ('' when valid)."""
    check: str = ""
    """The check that refused it: Ludwig's function name, or 'schema'."""
    judge: str = OWN_RULES
    """Who decided: Ludwig itself ('ludwig 0.17.10 (python PATH)') or perfmodel's rules."""
    ludwig_version: str = LUDWIG_VERSION_PINNED
    """The Ludwig version of the verdict."""
    resolved: dict[str, Any] | None = None
    """Ludwig's fully resolved config (ModelConfig.to_dict()) when Ludwig judged a valid config."""

    @property
    def is_gbm(self) -> bool:
        """Refused for `model_type: gbm` (removed after Ludwig 0.10; perfmodel still predicts it)."""
        return self.valid is False and "invalid model type: 'gbm'" in self.reason.lower()

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "reason": self.reason,
            "check": self.check,
            "judge": self.judge,
            "ludwig_version": self.ludwig_version,
        }


def _refuse(check: str, reason: str) -> LudwigVerdict:
    return LudwigVerdict(valid=False, reason=reason, check=check)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [f for f in value if isinstance(f, dict)] if isinstance(value, list) else []


def _section(cfg: dict[str, Any], key: str) -> dict[str, Any]:
    value = cfg.get(key)
    return value if isinstance(value, dict) else {}


def _encoder_type(f: dict[str, Any]) -> str:
    enc = f.get("encoder")
    if isinstance(enc, dict):
        return str(enc.get("type") or "").lower()
    return str(enc or "").lower()


def own_verdict(cfg: dict[str, Any]) -> LudwigVerdict:
    """perfmodel's rules for what Ludwig 0.17 accepts (first refusal wins, in Ludwig's order)."""
    model_type = str(cfg.get("model_type") or "ecd").lower()
    if model_type not in ("ecd", "llm"):
        return _refuse(
            "model_type", f"Invalid model type: {quote(model_type)}, expected one of: ['ecd', 'llm']"
        )
    for section in ("input_features", "output_features"):
        if not isinstance(cfg.get(section), list) or not cfg[section]:
            return _refuse("schema", f"JSON schema: {section} must be a non-empty list of features")
    inputs, outputs = _dicts(cfg.get("input_features")), _dicts(cfg.get("output_features"))
    for i, f in enumerate(cfg["input_features"]):
        if not isinstance(f, dict) or f.get("type") is None:
            return _refuse("schema", f"JSON schema: input_features[{i}] must be a mapping with a name and a type")
        if str(f.get("type")).lower() not in INPUT_TYPES:
            return _refuse(
                "schema", f"JSON schema: {quote(str(f.get('type')))} is not one of {sorted(INPUT_TYPES)}"
            )
    trainer = _section(cfg, "trainer") or _section(cfg, "training")
    if model_type == "llm":
        for f in inputs:
            if str(f.get("type")).lower() != "text":
                return _refuse(
                    "schema",
                    f"JSON schema: {quote(str(f.get('type')))} is not one of ['text'] "
                    "(llm input features are text)",
                )
    else:
        for f in inputs:
            enc = f.get("encoder")
            if (
                isinstance(enc, dict) and enc.get("adapter") is not None
            ):  # Ludwig's resolved configs carry adapter: null
                return _refuse(
                    "schema",
                    f"JSON schema: {quote(enc['adapter'])} is not valid under any of the given schemas "
                    f"(input feature {f.get('name')}: ECD encoders take no adapter; LoRA is for model_type: llm)",
                )
    names = [str(f.get("name")) for f in [*inputs, *outputs]]
    if len(set(names)) != len(names):
        return _refuse("check_feature_names_unique", "Feature names must be unique.")
    in_names = {str(f.get("name")) for f in inputs}
    for f in inputs:
        if f.get("tied") and str(f["tied"]) not in in_names:
            return _refuse(
                "check_tied_features_valid",
                f"Feature {f.get('name')} is tied to feature {f['tied']}, but the "
                f"'{f['tied']}' feature does not exist.",
            )
    if model_type == "ecd" and trainer.get("checkpoints_per_epoch") and trainer.get("steps_per_checkpoint"):
        return _refuse(
            "check_training_runway",
            "It is invalid to specify both trainer.checkpoints_per_epoch AND trainer.steps_per_checkpoint.",
        )
    if model_type == "llm":
        kind = str(trainer.get("type") or "none").lower()
        adapter = cfg.get("adapter")
        if kind == "finetune" and outputs and str(outputs[0].get("type")).lower() != "text":
            return _refuse(
                "check_llm_finetuning_output_feature_config",
                "LLM finetuning requires the output feature to be a text feature.",
            )
        pretrained = isinstance(adapter, dict) and adapter.get("pretrained_adapter_weights")
        if adapter and kind != "finetune" and not (kind == "none" and pretrained):
            return _refuse(
                "check_llm_finetuning_trainer_config", "LLM finetuning requires trainer type to be finetune."
            )
        adapter_type = str(
            adapter.get("type", "lora") if isinstance(adapter, dict) else adapter or ""
        ).lower()
        if kind != "none" and cfg.get("quantization") and adapter_type != "lora":
            return _refuse(
                "check_qlora_requirements",
                "Fine-tuning and LLM with quantization requires using the 'lora' adapter",
            )
        backend = cfg.get("backend")
        backend_type = str(backend.get("type") if isinstance(backend, dict) else backend or "").lower()
        if cfg.get("quantization") and backend_type == "ray":
            return _refuse(
                "check_llm_quantization_backend_incompatibility",
                "LLM with quantization requires the 'local' backend, found: 'ray'",
            )
    elif (
        inputs
        and outputs
        and str(inputs[0].get("type")).lower() == "text"
        and str(outputs[0].get("type")).lower() == "text"
    ):
        enc = inputs[0].get("encoder")
        pretrained_path = isinstance(enc, dict) and enc.get("pretrained_model_name_or_path")
        if _encoder_type(inputs[0]) in _HF_ENCODERS or pretrained_path:
            return _refuse(
                "check_llm_text_encoder_is_not_used_with_ecd",
                "Please use the `model_type: llm` for text-to-text models.",
            )
    pre = _section(cfg, "preprocessing")
    if pre.get("sample_size") is not None and float(pre.get("sample_ratio", 1.0) or 1.0) < 1.0:
        return _refuse(
            "check_sample_ratio_and_size_compatible", "sample_size cannot be used when sample_ratio < 1.0"
        )
    return LudwigVerdict(valid=True)


# --- Ludwig itself -------------------------------------------------------------------------------

_OFFLINE = 'import os; os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")\n'
"""Prefix of the script in a subprocess of its own: no network (in this process, the user's settings stay)."""
_SCRIPT = r"""
import json, sys, traceback
cfg = json.loads(sys.stdin.read())
from ludwig.globals import LUDWIG_VERSION
from ludwig.schema.model_types.base import ModelConfig
out = {"ludwig_version": LUDWIG_VERSION}
try:
    out.update(valid=True, resolved=ModelConfig.from_dict(cfg).to_dict())
except Exception as exc:
    text, cause = type(exc).__name__ + ": " + str(exc), exc.__cause__
    while cause is not None:
        text += " | " + type(cause).__name__ + ": " + str(cause); cause = cause.__cause__
    out.update(valid=False, reason=text[:2000], where=traceback.extract_tb(exc.__traceback__)[-1].name)
print("@@LUDWIG@@" + json.dumps(out, default=str))
"""
"""Runs inside the interpreter that has Ludwig: the config as JSON on stdin, the verdict as JSON."""


def _from_ludwig(out: dict[str, Any], judge: str) -> LudwigVerdict:
    version = str(out.get("ludwig_version") or "")
    if out.get("valid"):
        return LudwigVerdict(valid=True, judge=judge, ludwig_version=version, resolved=out.get("resolved"))
    reason = " ".join(str(out.get("reason") or "").split())
    if any(m in reason.lower() for m in _HUB_MARKERS):
        return LudwigVerdict(
            valid=None,
            reason=f"Ludwig needs the base model's config.json, not reachable offline: {reason[:300]}",
            check="base_model",
            judge=judge,
            ludwig_version=version,
        )
    return LudwigVerdict(
        valid=False,
        reason=reason,
        check=str(out.get("where") or "ModelConfig.from_dict"),
        judge=judge,
        ludwig_version=version,
    )


def ludwig_verdict_in_process(cfg: dict[str, Any]) -> LudwigVerdict:
    """Ludwig's verdict from this interpreter (imports Ludwig: ~9 s the first time on a 2-core CPU)."""
    buffer = io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(json.dumps(cfg))
    try:
        with contextlib.redirect_stdout(buffer):
            exec(compile(_SCRIPT, "<perfmodel-ludwig-check>", "exec"), {"__name__": "__perfmodel_ludwig__"})
    finally:
        sys.stdin = old_stdin
    return _parse(buffer.getvalue(), f"ludwig (this interpreter, {sys.executable})")


def ludwig_verdict_subprocess(cfg: dict[str, Any], python: str, *, timeout_s: float = 600.0) -> LudwigVerdict:
    """Ludwig's verdict from another interpreter (the Ludwig venv's python)."""
    try:
        proc = subprocess.run(
            [python, "-c", _OFFLINE + _SCRIPT],
            input=json.dumps(cfg),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"could not run Ludwig with {python}: {type(exc).__name__}: {exc}") from None
    if "@@LUDWIG@@" not in proc.stdout:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ConfigError(f"{python} could not run Ludwig's validator: {last}")
    return _parse(proc.stdout, f"ludwig ({python})")


def _parse(stdout: str, where: str) -> LudwigVerdict:
    out = json.loads(stdout.split("@@LUDWIG@@", 1)[1].strip().splitlines()[0])
    return _from_ludwig(
        out, f"{where.split(' (')[0]} {out.get('ludwig_version', '')} ({where.split(' (', 1)[1]}"
    )


def check_ludwig(
    cfg: dict[str, Any], *, use_ludwig: str = "auto", python: str | None = None
) -> LudwigVerdict:
    """Ludwig's verdict on `cfg`. use_ludwig: 'auto' (Ludwig when found: this interpreter, else the
    Ludwig venv; perfmodel's rules otherwise, and when Ludwig cannot decide: a base model it cannot
    reach offline), 'require' (ConfigError without Ludwig; Ludwig's undecided verdict stands), 'never'."""
    if use_ludwig not in ("auto", "require", "never"):
        raise ConfigError(f"use_ludwig must be auto, require or never; got {quote(use_ludwig)}")
    if use_ludwig != "never":
        in_process = python is None and ludwig_in_process()
        found = None if in_process else ludwig_python(python)
        if in_process or found is not None:
            verdict = ludwig_verdict_in_process(cfg) if found is None else ludwig_verdict_subprocess(cfg, found)
            if verdict.valid is not None or use_ludwig == "require":
                return verdict
            own = own_verdict(cfg)
            return replace(own, judge=f"{own.judge} ({verdict.judge} could not decide: {verdict.reason})")
        if use_ludwig == "require":
            require_ludwig_python(python)
    return own_verdict(cfg)


def refusal_message(verdict: LudwigVerdict) -> str:
    """One line for a config Ludwig rejects (ConfigError text)."""
    return (
        f"Ludwig {verdict.ludwig_version} rejects this config: {verdict.reason} [{verdict.check}; {verdict.judge}; "
        f"`perfmodel check-ludwig CONFIG` asks Ludwig itself]"
    )


def gbm_warning() -> str:
    return (
        f"warning: model_type gbm (LightGBM) was removed from Ludwig after {LAST_GBM_LUDWIG}: Ludwig "
        f"{LUDWIG_VERSION_PINNED} rejects this config (Invalid model type: 'gbm', expected one of: ['ecd', 'llm']); "
        f"predicted as Ludwig <= {LAST_GBM_LUDWIG} trained it"
    )
