"""Live ETA for Ludwig: a `ludwig.callbacks.Callback` over the monitor core.

    from perfmodel.monitor.ludwig import PerfmodelLudwigCallback
    model = LudwigModel(config, callbacks=[PerfmodelLudwigCallback()])

Ludwig's callback interface (ludwig/callbacks/__init__.py in 0.17.10; every method also takes
**kwargs): `on_train_start(model, config, config_fp)` after the trainer is built (`config` is the
resolved config, every default filled in; `config_fp` None when the config was a dict),
`on_batch_end(trainer, progress_tracker, save_path, sync_step=True)` after each batch on the
coordinator (Ludwig passes `sync_step=` by keyword: whether the optimizer stepped), `on_epoch_end
(...)` likewise, `on_train_end(output_directory)` before the model is saved.
`progress_tracker.steps` is the global step, in batches; `trainer.total_steps` the step count Ludwig
computed (epochs x ceil(training rows / batch size), or train_steps): perfmodel's total_steps for a
Ludwig config counts the same batches. Checked against real Ludwig 0.17.10 (docs/ludwig.md).
Inside a real Ludwig process without a CUDA device (and no hardware.gpu override), the prior is
predicted for this CPU.

Ludwig needs a newer Python than some perfmodel installs; when it is not importable this module
subclasses a stand-in with the same method names, so the adapter is still importable and testable.
The prior is perfmodel's prediction for the Ludwig config itself (`config_fp`, or the dict).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import yaml

from perfmodel.monitor.core import EtaSnapshot
from perfmodel.monitor.session import MonitorSession

try:  # pragma: no cover - depends on the environment
    from ludwig.callbacks import Callback as _LudwigCallback

    LUDWIG_AVAILABLE = True
except Exception:  # noqa: BLE001 - ImportError, or Ludwig failing to import on this Python
    LUDWIG_AVAILABLE = False

    class _LudwigCallback:  # type: ignore[no-redef]
        """Stand-in for ludwig.callbacks.Callback (the methods this adapter uses, as no-ops)."""

        def on_train_init(
            self,
            base_config: Any,
            experiment_directory: str,
            experiment_name: str,
            model_name: str,
            output_directory: str,
            resume_directory: Any,
            **kwargs: Any,
        ) -> None:
            pass

        def on_train_start(self, model: Any, config: Any, config_fp: Any, **kwargs: Any) -> None:
            pass

        def on_batch_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kwargs: Any) -> None:
            pass

        def on_batch_end(
            self, trainer: Any, progress_tracker: Any, save_path: str, sync_step: bool = True, **kwargs: Any
        ) -> None:
            pass

        def on_epoch_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kwargs: Any) -> None:
            pass

        def on_epoch_end(self, trainer: Any, progress_tracker: Any, save_path: str, **kwargs: Any) -> None:
            pass

        def on_train_end(self, output_directory: str, **kwargs: Any) -> None:
            pass

        def on_trainer_train_teardown(
            self, trainer: Any, progress_tracker: Any, save_path: str, is_coordinator: bool, **kwargs: Any
        ) -> None:
            pass


def _cuda() -> bool:
    """True when torch (imported by Ludwig already) sees a CUDA device; True when unsure."""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA setup: keep the config's own assumption
        return True


class PerfmodelLudwigCallback(_LudwigCallback):  # type: ignore[misc,valid-type]
    """ETA, stable-phase statistics and hints for a Ludwig training run. Keywords are those of
    `MonitorSession` (config, prediction, prior, confidence, clock, sampler, reporter, ...); the
    config defaults to the one Ludwig trains. `record=False` writes no run record. Reports are one
    line of at most 100 characters written with tqdm.write, above Ludwig's own tqdm bar (the
    detail with `verbose=True`; None: the PERFMODEL_VERBOSE environment variable)."""

    def __init__(
        self, config: Any = None, *, record: bool = True, verbose: bool | None = None, **session: Any
    ) -> None:
        self.record = record
        self._record_path = session.pop("record_path", None)
        overrides = list(session.pop("overrides", ()))
        if (
            LUDWIG_AVAILABLE
            and not any(str(o).startswith("hardware.gpu=") for o in overrides)
            and not _cuda()
        ):
            overrides.append("hardware.gpu=cpu")  # Ludwig configs never name hardware: this CPU, not an A100
        self.session = MonitorSession(
            source="ludwig", config=config, overrides=overrides, verbose=verbose, **session
        )
        self.last: EtaSnapshot | None = None
        self.final: EtaSnapshot | None = None
        self._epochs = 0

    def on_train_init(
        self,
        base_config: Any,
        experiment_directory: str,
        experiment_name: str,
        model_name: str,
        output_directory: str,
        resume_directory: Any,
        **kwargs: Any,
    ) -> None:
        if self.record and self._record_path is None:
            self._record_path = output_directory

    def on_train_start(self, model: Any, config: Any, config_fp: Any, **kwargs: Any) -> None:
        if not self.session.has_prior_source:
            if config_fp and Path(str(config_fp)).is_file():
                self.session.use_config(str(config_fp))
            elif isinstance(config, dict):
                # Ludwig configs are read from files: a dict is predicted through a temporary one.
                with tempfile.TemporaryDirectory(prefix="perfmodel-ludwig-") as tmp:
                    path = Path(tmp) / "ludwig_config.yaml"
                    path.write_text(yaml.safe_dump(config))
                    self.session.use_config(path)
                    self._resolve_safely()
        self._resolve_safely()
        if self.record:
            self.session.record_path = self._record_path

    def _resolve_safely(self) -> None:
        """Predict the prior; whatever fails (a perfmodel dependency missing from Ludwig's venv, such as
        lightgbm), Ludwig's training goes on and the ETA uses observed steps only."""
        try:
            self.session.resolve()
        except Exception as exc:  # noqa: BLE001 - a monitor must never stop the training it watches
            self.session.use_config(cast(Any, None))
            self.session.resolve()
            self.session.info.notes.append(
                f"no prediction to start from ({type(exc).__name__}: {exc}); the ETA uses observed steps only"
            )

    def on_batch_end(
        self, trainer: Any, progress_tracker: Any, save_path: str, sync_step: bool = True, **kwargs: Any
    ) -> None:
        total = getattr(trainer, "total_steps", None)
        if not self.session.monitor.started:  # the first batch's own time is unknown: timing starts here
            self.session.begin(
                total_steps=int(total) if total else None, start_step=int(progress_tracker.steps)
            )
            return
        if total:
            self.session.monitor.total_steps = int(total)
        snap = self.session.update(int(progress_tracker.steps))
        if snap is not None:
            self.last = snap

    def on_epoch_end(self, trainer: Any, progress_tracker: Any, save_path: str, **kwargs: Any) -> None:
        self._epochs += 1

    def on_train_end(self, output_directory: str, **kwargs: Any) -> None:
        if self.record and self.session.record_path is None:
            self.session.record_path = output_directory
        if self.session.monitor.started:
            m = self.session.monitor
            finished = m.total_steps is None or m.step >= m.total_steps
            self.final = self.session.end(finished=finished)
