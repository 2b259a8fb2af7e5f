"""How often one Ludwig prediction goes back to the raw config (issue 23, item 3): the calls into the
Ludwig reader's modules (perfmodel/config/ludwig*.py) while `load_workload` translates a config,
traced with sys.setprofile.

    python bench/ludwig_reader_census.py            # one JSON line per config
    python bench/ludwig_reader_census.py --detail   # and every function entered, with its count

Per config it prints:
  ludwig_calls             call events into functions of perfmodel/config/ludwig*.py
  ludwig_functions         distinct functions among them ("stops"), in `ludwig_modules` modules
  ludwig_features_calls    call events into perfmodel/config/ludwig_features.py
  raw_config_calls         calls that were handed the raw config dict itself (the `cfg` given to
                           translate_ludwig, by identity) as an argument, translate_ludwig excluded
  raw_config_functions     distinct functions among them, in `raw_config_modules` modules
  raw_config_validations   of those calls, the ones to the functions that validate it: own_verdict
                           (Ludwig's rules), features / section (the shape checks), read_ludwig
  raw_config_outside_reader  raw-dict calls made while read_ludwig is not running (before the
                           reader existed: all of them; with it: the mappers', which should be 0)
  readers_built            calls to read_ludwig (the reader record; 0 before it existed)

The counts are deterministic (no timing): the same code gives the same numbers on any host.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.config import load_workload  # noqa: E402 - after the path insert: this checkout's perfmodel

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    (
        "examples/ludwig-llama2-7b-qlora.yaml",
        {"dataset": "examples/data/instructions.csv", "gpu": "H100-SXM"},
    ),
    ("tests/fixtures/configs/ludwig_ecd_tabular.yaml", {"rows": 1000}),
    ("tests/fixtures/configs/ludwig_ecd_bert_frozen.yaml", {"rows": 20_000}),
    ("tests/fixtures/configs/ludwig_gbm.yaml", {"rows": 1000}),
]
"""The README's Ludwig example (LLM, with its dataset) and three fixtures: ECD estimated, ECD
pretrained, GBM."""
VALIDATORS = {"own_verdict", "features", "section", "read_ludwig"}


def census(path: str, options: dict[str, Any]) -> dict[str, Any]:
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    raw: dict[str, Any] = {}
    raw_calls: collections.Counter[tuple[str, str]] = collections.Counter()
    outside = [0]
    depth = [0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "return" and code.co_name == "read_ludwig":
            depth[0] -= 1
        if event != "call":
            return
        if code.co_name.startswith("<"):  # comprehensions, lambdas
            return
        module = code.co_filename.replace("\\", "/")
        if "/perfmodel/config/ludwig" not in module:
            return
        calls[(module.rsplit("/", 1)[1], code.co_name)] += 1
        if code.co_name == "read_ludwig":
            depth[0] += 1
        if code.co_name == "translate_ludwig":
            raw["cfg"] = frame.f_locals["cfg"]
            return
        if "cfg" in raw:
            n_args = code.co_argcount + code.co_kwonlyargcount
            if any(frame.f_locals.get(name) is raw["cfg"] for name in code.co_varnames[:n_args]):
                raw_calls[(module.rsplit("/", 1)[1], code.co_name)] += 1
                outside[0] += depth[0] == 0

    sys.setprofile(profile)
    try:
        load_workload(ROOT / path, **options)
    finally:
        sys.setprofile(None)
    return {
        "config": path,
        "options": {k: str(v) for k, v in options.items()},
        "ludwig_calls": sum(calls.values()),
        "ludwig_functions": len(calls),
        "ludwig_modules": len({m for m, _ in calls}),
        "ludwig_features_calls": sum(n for (m, _), n in calls.items() if m == "ludwig_features.py"),
        "raw_config_calls": sum(raw_calls.values()),
        "raw_config_functions": len(raw_calls),
        "raw_config_modules": len({m for m, _ in raw_calls}),
        "raw_config_validations": sum(n for (_, f), n in raw_calls.items() if f in VALIDATORS),
        "raw_config_outside_reader": outside[0],
        "readers_built": calls.get(("ludwig_features.py", "read_ludwig"), 0),
        "detail": {f"{m}:{f}": n for (m, f), n in sorted(calls.items())},
        "raw_detail": {f"{m}:{f}": n for (m, f), n in sorted(raw_calls.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detail", action="store_true", help="also list every function entered")
    args = parser.parse_args()
    for path, options in CONFIGS:
        row = census(path, options)
        if not args.detail:
            row.pop("detail")
            row.pop("raw_detail")
        print(json.dumps(row))


if __name__ == "__main__":
    main()
