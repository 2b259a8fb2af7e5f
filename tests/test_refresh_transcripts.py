"""bench/refresh_transcripts.py: which doc blocks are transcripts, which it re-runs, and that it
writes what the command prints now; and (slow: about a dozen CLI runs) that the docs show what the
shipped model prints: docs/decide.md's transcripts and the README's first prediction."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _load():  # type: ignore[no-untyped-def]
    return load_bench("refresh_transcripts")


DOC = """# doc

```
$ COLUMNS=100 perfmodel gpus
stale output
```

```
$ perfmodel sweep --config a.yaml \\
    --vary training.micro_batch_size=1,2
first line
...
```

```
$ rm -rf /
nothing
```

```bash
make demo
```
"""


def test_blocks_are_parsed_with_their_continued_commands() -> None:
    rt = _load()
    lines = DOC.split("\n")
    found = rt.transcripts(lines)
    assert [t.command.split("\n")[0] for t in found] == [
        "COLUMNS=100 perfmodel gpus", "perfmodel sweep --config a.yaml \\", "rm -rf /",
    ]  # fmt: skip
    assert found[1].command.endswith("--vary training.micro_batch_size=1,2")
    assert lines[found[0].start : found[0].end] == ["stale output"]


def test_a_stale_transcript_is_rewritten_and_the_others_are_left_alone(tmp_path: Path) -> None:
    rt = _load()
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    ran, changed, skipped = rt.refresh(doc, check=True)
    assert (ran, changed) == (1, 1) and doc.read_text() == DOC  # --check writes nothing
    assert skipped == ["edited: perfmodel sweep --config a.yaml --vary training.micro_batch_size=1,2", "rm -rf /"]
    rt.refresh(doc, check=False)
    text = doc.read_text()
    assert "stale output" not in text and "H100-SXM" in text  # `perfmodel gpus` lists it
    assert text.count("first line\n...") == 1 and "$ rm -rf /\nnothing" in text
    assert rt.refresh(doc, check=True)[1] == 0  # now up to date


@pytest.mark.slow
def test_decide_md_transcripts_are_what_the_commands_print_now() -> None:
    ran, changed, _ = _load().refresh(ROOT / "docs" / "decide.md", check=True)
    assert ran >= 5
    assert changed == 0, "docs/decide.md is out of date with the shipped model: run `make transcripts`"


@pytest.mark.slow
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
