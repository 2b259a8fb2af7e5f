"""Build an expensive test fixture once per test session, even under `pytest -n 2`.

The first xdist worker to get the file lock builds the value and pickles it into the folder all
workers of the session share (the parent of each worker's base temp); the others wait for the
lock, then read it. Without xdist (`worker_id == "master"`) the value is just built.
(xdist's `--dist loadgroup` would pin a module to one worker instead, but it stopped grouping
with pytest 9.2's structured node ids: pytest-dev/pytest-xdist#1386.)
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def build_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, build: Callable[[Path], T]
) -> T:
    """`build(folder)` once per session; `folder` is shared by every worker and outlives the build."""
    from filelock import FileLock

    if worker_id == "master":
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent
    cache = shared / f"{name}.pickle"
    with FileLock(str(shared / f"{name}.lock")):
        if cache.is_file():
            value: Any = pickle.loads(cache.read_bytes())
            return value  # type: ignore[no-any-return]
        folder = shared / name
        folder.mkdir(exist_ok=True)
        built = build(folder)
        cache.write_bytes(pickle.dumps(built))
        return built
