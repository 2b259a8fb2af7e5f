"""Every test, and every process a test starts, keeps `perfmodel train`'s saved models out of the
checkout: $PERFMODEL_RUNS_DIR points at a temporary folder unless a test sets its own."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _runs_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> None:
    if "PERFMODEL_RUNS_DIR" not in os.environ:
        os.environ["PERFMODEL_RUNS_DIR"] = str(tmp_path_factory.mktemp("runs"))
