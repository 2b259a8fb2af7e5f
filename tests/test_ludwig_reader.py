"""The Ludwig reader (issue 23): one prediction builds one `LudwigConfig`, checks the raw config
with perfmodel's Ludwig rules once, and hands the raw dict to nothing outside the reader, so no
mapper can go back to it and re-read or re-validate it."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from perfmodel.config import load_workload, ludwig, ludwig_features
from perfmodel.config.ludwig_features import LudwigConfig, read_ludwig
from perfmodel.config.overrides import read_config_file
from perfmodel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "configs"
CASES = [
    ("examples/ludwig-llama2-7b-qlora.yaml", {"dataset": ROOT / "examples/data/instructions.csv", "gpu": "H100-SXM"}),
    ("tests/fixtures/configs/ludwig_ecd_tabular.yaml", {"rows": 1000}),
    ("tests/fixtures/configs/ludwig_ecd_bert_frozen.yaml", {"rows": 20_000}),
    ("tests/fixtures/configs/ludwig_ecd_legacy.yaml", {"rows": 1000}),
    ("tests/fixtures/configs/ludwig_ecd_resnet.yaml", {"rows": 1000}),
    ("tests/fixtures/configs/ludwig_llm_lora_deepspeed_ray.yaml", {"rows": 1000}),
    ("tests/fixtures/configs/ludwig_gbm.yaml", {"rows": 1000}),
]  # fmt: skip
ALLOWED_OUTSIDE = {"translate_ludwig", "is_ludwig"}
"""The functions that may hold the raw dict outside the reader: the entry point and the detection."""


@dataclass
class Trace:
    readers_built: int = 0
    verdicts: int = 0
    inside: Counter[str] = field(default_factory=Counter)
    """Calls handed the raw dict while read_ludwig runs."""
    outside: Counter[str] = field(default_factory=Counter)
    """Calls handed the raw dict anywhere else in perfmodel."""


def trace_raw_config(run: Callable[[], Any]) -> Trace:
    """Every call into perfmodel that is handed the raw Ludwig config (the dict given to
    translate_ludwig, by identity), split by whether read_ludwig is on the stack."""
    out, raw, depth = Trace(), [], [0]
    reader = read_ludwig.__code__

    def profile(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "return" and code is reader:
            depth[0] -= 1
        if event != "call" or "/perfmodel/" not in code.co_filename.replace("\\", "/"):
            return
        if code is reader:
            out.readers_built += 1
            depth[0] += 1
        if code.co_name == "own_verdict":
            out.verdicts += 1
        if code.co_name == "translate_ludwig":
            raw[:] = [frame.f_locals["cfg"]]
        if not raw or code.co_name.startswith("<"):
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(frame.f_locals.get(n) is raw[0] for n in names):
            (out.inside if depth[0] > 0 else out.outside)[code.co_name] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return out


@pytest.mark.parametrize("path,options", CASES, ids=[Path(p).stem for p, _ in CASES])
def test_one_prediction_reads_the_raw_config_once(path, options):
    t = trace_raw_config(lambda: load_workload(ROOT / path, **options))
    assert t.readers_built == 1
    assert t.verdicts == 1 and t.inside["own_verdict"] == 1  # perfmodel's Ludwig rules, once, by the reader
    assert set(t.outside) <= ALLOWED_OUTSIDE, f"mappers handed the raw config: {dict(t.outside)}"
    assert t.outside["translate_ludwig"] == 1


def test_the_trace_catches_a_mapper_that_goes_back_to_the_raw_dict(monkeypatch):
    """The check above can fail: a translation that re-validates the raw dict after the reader
    (or builds a second reader) is reported."""
    real = ludwig.read_ludwig

    def reread(cfg: dict[str, Any]) -> LudwigConfig:
        config = real(cfg)
        ludwig_features.features(cfg, "input_features")  # what every mapper did before the reader
        return config

    monkeypatch.setattr(ludwig, "read_ludwig", reread)
    t = trace_raw_config(lambda: load_workload(FIX / "ludwig_ecd_tabular.yaml", rows=1000))
    assert t.outside["features"] == 1 and t.readers_built == 1

    monkeypatch.setattr(ludwig, "read_ludwig", lambda cfg: (real(cfg), real(cfg))[1])
    t = trace_raw_config(lambda: load_workload(FIX / "ludwig_ecd_tabular.yaml", rows=1000))
    assert t.readers_built == 2 and t.verdicts == 2


def test_the_record_has_the_resolved_features_and_is_frozen():
    config = read_ludwig(read_config_file(FIX / "ludwig_ecd_tabular.yaml"))
    assert config.model_type == "ecd" and config.trainer_path == "trainer"
    first = config.inputs[0]
    assert first.where == f"input_features[0] ({first.name})" and not first.output
    assert first.encoder  # Ludwig's default encoder of its type, resolved
    assert config.combiner.get("type") and config.split.train_fraction == 0.7
    with pytest.raises(FrozenInstanceError):
        config.model_type = "llm"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.trainer["epochs"] = 1  # type: ignore[index]


def test_the_reader_names_the_dotted_key_of_a_bad_section():
    cfg = read_config_file(FIX / "ludwig_ecd_tabular.yaml")
    with pytest.raises(ConfigError, match=r"^preprocessing\.split must be a mapping, got 5$"):
        read_ludwig({**cfg, "preprocessing": {"split": 5}})
    with pytest.raises(ConfigError, match=r"^defaults\.number\.encoder must be a mapping"):
        read_ludwig({**cfg, "defaults": {"number": {"encoder": 5}}})
