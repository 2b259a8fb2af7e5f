"""The docs show what the shipped model prints: docs/decide.md's command transcripts and the
README's first prediction are re-run and compared line by line (`make transcripts` rewrites the
first after a new model; the README block by hand). Slow: about a dozen CLI runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _refresh_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("refresh_transcripts", ROOT / "bench" / "refresh_transcripts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["refresh_transcripts"] = module
    spec.loader.exec_module(module)
    return module


def test_decide_md_transcripts_are_what_the_commands_print_now() -> None:
    rt = _refresh_module()
    ran, changed, _ = rt.refresh(ROOT / "docs" / "decide.md", check=True)
    assert ran >= 5
    assert changed == 0, "docs/decide.md is out of date with the shipped model: run `make transcripts`"


def test_the_readme_demo_block_is_what_make_demo_prints() -> None:
    text = (ROOT / "README.md").read_text().split("\n")
    start = text.index("perfmodel prediction — intervals at 90%")
    end = next(i for i in range(start, len(text)) if text[i].startswith("```"))
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "perfmodel", "predict", "--config", "examples/llama2-7b-lora.yaml"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    printed = [line.rstrip() for line in res.stdout.rstrip("\n").split("\n")]
    assert printed == text[start:end]
