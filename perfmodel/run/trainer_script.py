"""`perfmodel validate --trainer train.py -- ARGS`: validate a Hugging Face Trainer script as the
user runs it, without editing it.

The script runs in this process (`runpy`, as `python train.py ARGS` would: `__name__ ==
"__main__"`, `sys.argv`, its folder first on `sys.path`) with `transformers.Trainer.train`
intercepted. Its first call - on whichever Trainer (or subclass: Seq2SeqTrainer, TRL's trainers)
the script built, with the script's own model, data, collator and arguments - becomes
`perfmodel.run.validate.validate_trainer(trainer, steps=N)`: the trainer's own `train()` with
`max_steps` capped at N (a share `fraction` of the full run's steps when N is not given), the
phase callback attached, then the extrapolation to the full run. With `check_full`
the full run trains right after, for the error. Then the script is stopped at that call, so
whatever it does after training (saving, pushing, evaluating) does not run. What the script prints
goes to stderr: stdout is the caller's (`--json`).
"""

from __future__ import annotations

import contextlib
import math
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError
from perfmodel.run.extrapolate import HOST_NOISE
from perfmodel.run.validate import (
    ValidateError,
    ValidationResult,
    check_trainer,
    trainer_full_shape,
    validate_trainer,
)


class _Validated(BaseException):
    """Raised from the intercepted `train()` to stop the script there (BaseException: a script's
    `except Exception` does not swallow it)."""


def partial_steps(full_steps: int, steps: int | None, fraction: float | None) -> int:
    """Steps of the partial run: `steps`, else `fraction` of the full run's (at least 1)."""
    if steps is not None:
        return int(steps)
    if fraction is None or not 0 < fraction < 1:
        raise ConfigError(f"--fraction must be in (0, 1); got {fraction}")
    return max(1, math.ceil(fraction * full_steps))


def validate_trainer_script(
    script: str | Path,
    argv: Sequence[str] = (),
    *,
    steps: int | None = None,
    fraction: float | None = 0.1,
    check_full: bool = False,
    confidence: float = 0.9,
    host_noise: float = HOST_NOISE,
    live_eta: bool = False,
) -> ValidationResult:
    """Run `script` with `argv` and validate the first Trainer it trains (module docstring)."""
    path = Path(script)
    if not path.is_file():
        raise ConfigError(f"--trainer {script}: no such script (give the Python file that builds and trains a Trainer)")
    # transformers: heavy, only a Trainer validation needs it
    from transformers import Trainer

    original = Trainer.train
    box: dict[str, Any] = {}

    def intercepted(self: Any, *args: Any, **kwargs: Any) -> Any:
        Trainer.train = original  # type: ignore[method-assign]  # validate_trainer calls the real one
        if args or kwargs.get("resume_from_checkpoint"):
            box["note"] = "the script's train() arguments (resume_from_checkpoint) were not used by the partial run"
        n = partial_steps(trainer_full_shape(self).steps, steps, fraction)
        result = validate_trainer(self, steps=n, confidence=confidence, host_noise=host_noise, live_eta=live_eta)
        if check_full:
            result = check_trainer(result, self)
        box["result"] = result
        raise _Validated

    saved_argv, saved_path = sys.argv[:], sys.path[:]
    Trainer.train = intercepted  # type: ignore[method-assign]
    try:
        sys.argv = [str(path), *argv]
        sys.path.insert(0, str(path.resolve().parent))
        with contextlib.redirect_stdout(sys.stderr):  # the script's prints (the Trainer's logs) are logs
            runpy.run_path(str(path), run_name="__main__")
    except _Validated:
        pass
    except SystemExit as exc:
        if "result" not in box:
            raise ValidateError(f"{path} exited (code {exc.code}) before it called Trainer.train()") from None
    finally:
        Trainer.train = original  # type: ignore[method-assign]
        sys.argv[:], sys.path[:] = saved_argv, saved_path
    if "result" not in box:
        raise ValidateError(
            f"{path} ran to its end without calling transformers.Trainer.train(): nothing to validate "
            "(for a finished partial run use `perfmodel monitor RUN --total-steps N`)"
        )
    result: ValidationResult = box["result"]
    if "note" in box:
        result.notes.append(box["note"])
    return result
