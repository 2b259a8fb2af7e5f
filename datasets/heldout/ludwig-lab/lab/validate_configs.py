"""Ludwig's own verdict on configs, and Ludwig's fully resolved config for each valid one.

Run with the Ludwig venv:  .venv-ludwig/bin/python validate_configs.py CONFIG_OR_DIR...

Writes golden_schema.json ({file: {"valid", "reason", "ludwig_version", "model_type",
"error_type"}}) and defaults/<stem>.json (the resolved config, ModelConfig.to_dict()).

Validator: ludwig.schema.model_types.base.ModelConfig.from_dict (Ludwig 0.17.10), the same call
LudwigModel.__init__ makes (ludwig/api.py: LudwigModel.__init__ -> ModelConfig.from_dict). It
upgrades old configs, merges defaults, runs JSON-schema validation (check_schema), builds the
pydantic config and runs the auxiliary config checks (ludwig/config_validation/checks.py).

No network: HF_HUB_OFFLINE=1; run with HF_HOME=hf_home after stub_hf_configs.py so that the
`base_model` check (AutoConfig.from_pretrained) finds the model's config.json. A config whose validation needs a Hugging Face model's files that
are not available offline is reported with error_type "needs_hub" (the verdict is then about
reachability, not schema).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import yaml

HUB_MARKERS = (
    "offline",
    "huggingface.co",
    "couldn't connect",
    "can't load",
    "not a local folder",
    "is not a valid model identifier",
    "localentrynotfound",
    "we couldn't connect",
)


def classify(exc: BaseException) -> str:
    text = (type(exc).__name__ + " " + str(exc)).lower()
    cause = exc.__cause__
    while cause is not None:
        text += " " + type(cause).__name__.lower() + " " + str(cause).lower()
        cause = cause.__cause__
    if any(m in text for m in HUB_MARKERS):
        return "needs_hub"
    return "schema"


def main(argv: list[str]) -> int:
    t0 = time.time()
    from ludwig.globals import LUDWIG_VERSION
    from ludwig.schema.model_types.base import ModelConfig

    import_s = time.time() - t0
    out_json = Path("golden_schema.json")
    defaults_dir = Path("defaults")
    defaults_dir.mkdir(exist_ok=True)
    files: list[Path] = []
    for a in argv:
        p = Path(a)
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])

    golden = json.loads(out_json.read_text()) if out_json.exists() else {}
    for f in files:
        raw = yaml.safe_load(f.read_text())
        t = time.time()
        rec: dict = {
            "ludwig_version": LUDWIG_VERSION,
            "model_type": raw.get("model_type", "ecd"),
            "source": str(f.parent.resolve()),
        }
        if raw.get("base_model"):
            rec["base_model_config_source"] = (
                "lab-local HF cache stub (config.json only, stub_hf_configs.py)"
                if os.environ.get("HF_HOME", "").endswith("hf_home")
                else "HF cache / hub"
            )
        try:
            cfg = ModelConfig.from_dict(raw)
            rec.update(valid=True, reason="", error_type="")
            resolved = cfg.to_dict()
            (defaults_dir / f"{f.stem}.json").write_text(json.dumps(resolved, indent=1, default=str))
        except Exception as e:  # noqa: BLE001  (we record Ludwig's reason, whatever it raised)
            kind = classify(e)
            rec.update(
                valid=False if kind == "schema" else None,
                reason=f"{type(e).__name__}: {e}".strip()[:2000],
                error_type=kind,
            )
            rec["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
        rec["validate_s"] = round(time.time() - t, 3)
        golden[f.name] = rec
        v = rec["valid"]
        print(f"{f.name}: valid={v} {rec['error_type']} {rec['reason'][:200]}")
    out_json.write_text(json.dumps(golden, indent=1, sort_keys=True))
    print(f"import_s={import_s:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
