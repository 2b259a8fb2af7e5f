"""Watching a run: a live ETA that starts at perfmodel's prediction and narrows as steps accrue,
warm-up excluded, the stable phase's statistics, GPU/CPU utilisation and bottleneck hints.

One core (`core.RunMonitor`, arithmetic in `eta`), thin adapters:

    perfmodel.monitor.StepTimer                      hand-written loops
    perfmodel.monitor.hf.PerfmodelCallback           Hugging Face Trainer (imports transformers)
    perfmodel.monitor.ludwig.PerfmodelLudwigCallback Ludwig
    perfmodel.monitor.readers                        files of runs going or done (`perfmodel monitor`)

Importing this package loads neither torch, transformers, mlflow nor Ludwig.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.monitor.core import EtaSnapshot, RunMonitor
    from perfmodel.monitor.eta import StepTimePrior
    from perfmodel.monitor.steptimer import StepTimer

__all__ = ["EtaSnapshot", "RunMonitor", "StepTimePrior", "StepTimer"]

_LAZY = {
    "EtaSnapshot": "perfmodel.monitor.core",
    "RunMonitor": "perfmodel.monitor.core",
    "StepTimePrior": "perfmodel.monitor.eta",
    "StepTimer": "perfmodel.monitor.steptimer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)

    return getattr(importlib.import_module(module), name)
