"""Where real Ludwig is: this interpreter, or the Ludwig venv's python (`make ludwig-env`).

Ludwig 0.17 needs Python >= 3.12 and a 6 GB stack (torch, transformers), so perfmodel does not
depend on it; a user who has it gets Ludwig's own answers (`perfmodel check-ludwig`, the resolved
defaults) from, in this order:
  1. `ludwig` importable in the current interpreter (found without importing it);
  2. $PERFMODEL_LUDWIG_PYTHON: a python that can import ludwig;
  3. the venv `make ludwig-env` builds: $LUDWIG_VENV, else $XDG_CACHE_HOME/perfmodel/ludwig-0.17
     (default ~/.cache/perfmodel/ludwig-0.17), its bin/python.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from perfmodel.errors import ConfigError

ENV_PYTHON = "PERFMODEL_LUDWIG_PYTHON"
ENV_VENV = "LUDWIG_VENV"
LUDWIG_VERSION_PINNED = "0.17.10"
"""The Ludwig release perfmodel's own rules and defaults table were read from."""


def default_venv() -> Path:
    """The folder `make ludwig-env` builds the Ludwig venv in."""
    if os.environ.get(ENV_VENV):
        return Path(os.environ[ENV_VENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfmodel" / "ludwig-0.17"


def ludwig_in_process() -> bool:
    """True when `import ludwig` would find a package in this interpreter (nothing is imported)."""
    try:
        return importlib.util.find_spec("ludwig") is not None
    except (ImportError, ValueError):
        return False


def ludwig_python(explicit: str | None = None) -> str | None:
    """The python of a Ludwig venv (explicit, $PERFMODEL_LUDWIG_PYTHON, or make ludwig-env's), or None."""
    for candidate in (explicit, os.environ.get(ENV_PYTHON), str(default_venv() / "bin" / "python")):
        if (
            candidate
            and Path(candidate).expanduser().is_file()
            and os.access(Path(candidate).expanduser(), os.X_OK)
        ):
            return str(Path(candidate).expanduser())
    return None


def require_ludwig_python(explicit: str | None = None) -> str:
    """Like `ludwig_python`, but ConfigError (one line, with the fix) when there is none."""
    found = ludwig_python(explicit)
    if found is None:
        where = explicit or os.environ.get(ENV_PYTHON) or str(default_venv() / "bin" / "python")
        raise ConfigError(
            f"no Ludwig venv found (looked for {where}): run `make ludwig-env` (Python 3.12 + "
            f"ludwig=={LUDWIG_VERSION_PINNED}, ~6 GB) or set {ENV_PYTHON}=/path/to/python"
        )
    return found
