"""Golden `perfmodel predict --json` documents, one per example config (tests/golden/*.json).

    python -m tests.golden            # compare: list every difference, exit 1 when there is one
    python -m tests.golden --update   # rewrite the golden files from the current code

A change of the model (a retrained models/, a new cost-model term) legitimately moves the numbers:
regenerate with `--update`, read the diff (`git diff tests/golden`), and commit it with the change.

Numbers are compared at a relative tolerance of `RELATIVE_TOLERANCE` (1e-6, plus `ABSOLUTE_TOLERANCE`
for values near zero): far below any real change of the model, above the last-digit differences
of libm's exp/log between machines. Everything else (keys, strings, booleans, list lengths, null)
must be equal. The documents come from the real entry point (`perfmodel.cli.main`), run in this
process from the project root, so relative paths in the arguments mean what they mean to a user
there.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
EXAMPLES = ROOT / "examples"
RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE = 1e-12

EXTRA_ARGS: dict[str, list[str]] = {
    # a Ludwig config needs its amount of data; README's command
    "ludwig-llama2-7b-qlora": ["--dataset", "examples/data/instructions.csv", "--gpu", "H100-SXM"],
}
"""Flags an example needs beside `--config FILE --json` (paths relative to the project root)."""


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def argv_for(name: str) -> list[str]:
    return ["predict", "--config", f"examples/{name}.yaml", *EXTRA_ARGS.get(name, []), "--json"]


@contextlib.contextmanager
def _in_root() -> Iterator[None]:
    before = Path.cwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(before)


def document(name: str) -> dict[str, Any]:
    """What `perfmodel predict --json` prints for example `name` (run in this process)."""
    from perfmodel.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _in_root(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv_for(name))
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(f"perfmodel {' '.join(argv_for(name))} failed: {err.getvalue()}") from None
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Every place where `actual` differs from `expected` (numbers: beyond the tolerance)."""
    here = where or "(top level)"
    numbers = (int, float)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return [] if expected is actual else [f"{here}: {expected!r} -> {actual!r}"]
    if isinstance(expected, numbers) and isinstance(actual, numbers):
        ok = math.isclose(expected, actual, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)
        return [] if ok else [f"{here}: {expected!r} -> {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{where}.{k}: missing" for k in expected if k not in actual]
        out += [f"{where}.{k}: new key" for k in actual if k not in expected]
        for key in expected:
            if key in actual:
                out += differences(expected[key], actual[key], f"{where}.{key}" if where else str(key))
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{here}: {len(expected)} items -> {len(actual)}: {actual!r}"[:400]]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(e, a, f"{where}[{i}]")
        ]
    return [] if expected == actual else [f"{here}: {expected!r} -> {actual!r}"[:400]]


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"predict-{name}.json"


def update() -> list[Path]:
    GOLDEN_DIR.mkdir(exist_ok=True)
    written = []
    for name in example_names():
        path = golden_path(name)
        path.write_text(json.dumps(document(name), indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        for path in update():
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if argv:
        print("usage: python -m tests.golden [--update]", file=sys.stderr)
        return 2
    found = 0
    for name in example_names():
        if not golden_path(name).is_file():
            print(f"{name}: no golden file (python -m tests.golden --update)")
            found += 1
            continue
        diffs = differences(json.loads(golden_path(name).read_text()), document(name))
        for line in diffs:
            print(f"{name}: {line}")
        found += len(diffs)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
