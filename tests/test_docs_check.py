"""`make docs-check` (bench/docs_check.py): which README commands count as runnable, that a
failing one fails the check, and that the quick examples with the bundled files run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "docs_check.py"
CHEAP_EXAMPLES = (
    "perfmodel --version",
    "perfmodel predict --config examples/llama2-7b-lora.yaml",
    "perfmodel predict --config examples/ludwig-llama2-7b-qlora.yaml --dataset examples/data/instructions.csv "
    "--gpu H100-SXM",
    "perfmodel predict --config examples/llama2-7b-lora.yaml --num-gpus 4 \\\n"
    "    --set training.micro_batch_size=16 --set hardware.strategy=fsdp --json",
    "perfmodel gpus",
    "perfmodel models",
    "perfmodel sweep --config examples/llama2-7b-lora.yaml --vary hardware.gpu=A100-80GB,H100-SXM",
    "perfmodel compare examples/llama2-7b-lora.yaml examples/custom-dims-qlora.yaml",
)
"""What the README shows a new user in its first minutes, with the bundled examples."""


def _load():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_check", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_check"] = module
    spec.loader.exec_module(module)
    return module


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_only_marked_bash_blocks_are_extracted():
    dc = _load()
    md = (
        "# t\n\n```bash\nperfmodel train   # not marked\n```\n\n"
        "<!-- docs-check -->\n\n```bash\n. .venv/bin/activate\n# a comment line\n\n"
        "perfmodel gpus           # 49 accelerators\n"
        "perfmodel predict --config a.yaml \\\n    --json\n```\n\n"
        "<!-- docs-check -->\nsome text in between\n```bash\nperfmodel models\n```\n"
        "<!-- docs-check -->\n```\nplain fence: output, not commands\n```\n"
        "<!-- docs-check -->\n```bash\nmake demo\n```\n"
    )
    got = [(c.command, c.line) for c in dc.extract_commands(md)]
    assert got == [
        ("perfmodel gpus           # 49 accelerators", 13),
        ("perfmodel predict --config a.yaml --json", 14),
        ("make demo", 29),
    ]
    assert (
        dc.is_cheap("perfmodel gpus") and not dc.is_cheap("make demo") and not dc.is_cheap("perfmodel train")
    )


@pytest.mark.slow
def test_a_failing_command_fails_the_check(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "<!-- docs-check -->\n```bash\nperfmodel --version\nperfmodel predict --config nope.yaml\n```\n"
    )
    res = _check("--readme", str(readme))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL" in res.stdout and "nope.yaml" in res.stdout and "1 of 2 commands passed" in res.stdout


@pytest.mark.slow
def test_the_bundled_examples_run_as_written(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- docs-check -->\n```bash\n" + "\n".join(CHEAP_EXAMPLES) + "\n```\n")
    res = _check("--readme", str(readme), "--cheap")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(CHEAP_EXAMPLES)} of {len(CHEAP_EXAMPLES)} commands passed" in res.stdout


@pytest.mark.slow
def test_the_readmes_quick_runnable_commands_pass():
    dc = _load()
    commands = [c for c in dc.extract_commands((ROOT / "README.md").read_text()) if dc.is_cheap(c.command)]
    if not commands:
        pytest.skip(f"README.md marks no quick command runnable yet ({dc.MARKER} before a ```bash block)")
    res = _check("--cheap")
    assert res.returncode == 0, res.stdout + res.stderr
