"""Import LightGBM without its optional integrations, for one-shot CLI processes.

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
