"""Import LightGBM without its optional integrations, for one-shot CLI processes; import MLflow
with its telemetry off (`import_mlflow`).

`import lightgbm` pulls in its optional integrations (scikit-learn, dask, pyarrow, ...), over a
second of the `perfmodel predict` cold-start budget, although a booster loaded from text needs
none of them. A process that only predicts can call `use_lean_import()` first: while LightGBM
is imported, those modules are hidden (`sys.modules[name] = None` makes `import name` raise
ImportError, which LightGBM handles as "integration not installed"), then unhidden.

A process that later trains with LightGBM's scikit-learn API must not use it: LightGBM would
stay without its scikit-learn classes for the life of the process. Library users get a normal
import unless they opt in.
"""

from __future__ import annotations

import os
import sys
from typing import Any

LEAN_LIGHTGBM_IMPORT = False
"""Whether `import_lightgbm()` hides the optional integrations (set by `use_lean_import()`)."""

OPTIONAL_INTEGRATIONS = ("sklearn", "dask", "datatable", "graphviz", "matplotlib", "pyarrow", "cffi")
"""Modules LightGBM imports opportunistically and a text booster does not need."""


def use_lean_import(lean: bool = True) -> None:
    """Opt this process in (or out) of the lean LightGBM import."""
    global LEAN_LIGHTGBM_IMPORT
    LEAN_LIGHTGBM_IMPORT = lean


def import_lightgbm(lean: bool | None = None) -> Any:
    """`import lightgbm`; lean (optional integrations hidden) when `lean`, which defaults to the
    process-wide `LEAN_LIGHTGBM_IMPORT`. A LightGBM already imported is returned as it is."""
    lean = LEAN_LIGHTGBM_IMPORT if lean is None else lean
    if "lightgbm" in sys.modules or not lean:
        # LightGBM: only when a model is fitted or loaded
        import lightgbm

        return lightgbm
    hidden = [name for name in OPTIONAL_INTEGRATIONS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` raise ImportError
    try:
        import lightgbm
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return lightgbm


TELEMETRY_SWITCH = "MLFLOW_DISABLE_TELEMETRY"
"""The environment variable MLflow documents for turning its usage telemetry off."""


def import_mlflow() -> Any:
    """`import mlflow`, with its usage telemetry off unless the user asked for it, without download
    progress bars, and without the "View run ... at: URL" line MLflow prints on stdout when a run
    ends on a tracking server (stdout carries `--json` results). Each is a default the user's
    environment overrides."""
    os.environ.setdefault(TELEMETRY_SWITCH, "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars on stderr
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # stdout is for results (--json)
    # mlflow: seconds to import, only tracking needs it
    import mlflow

    return mlflow
