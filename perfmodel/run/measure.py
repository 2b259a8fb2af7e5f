"""Measuring a probe: the collectors' harness (perfmodel.measure.slices.run_slice) with every step timed
here too, the budget enforced, and a new plan when the first one is too slow or too big.

Warm-up is the harness's warm-up steps plus any further unsettled steps by the monitor's rule
(perfmodel.monitor.eta), as long as >= MIN_MEASURED_STEPS measured steps remain. If, after
warm-up, 10 measured steps would pass the budget, the probe is planned again from the observed
step time (up to MAX_ATTEMPTS); an out-of-memory probe is planned again with half the memory. The
budget and Ctrl-C stop it cleanly: with >= 10 measured steps those are used.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from perfmodel.catalog import get_gpu
from perfmodel.errors import PerfModelError, UnsupportedError
from perfmodel.measure import slices
from perfmodel.monitor import eta
from perfmodel.run.plan import MEMORY_FRACTION, Limits, ProbePlan, choose_plan

STEP_BUDGET_FRACTION = 0.5
"""Share of the remaining budget planned for stepping (building the model and predicting take the rest)."""
MAX_ATTEMPTS = 3
MIN_MEASURED_STEPS = 10


class ProbeError(PerfModelError, RuntimeError):
    """The probe could not measure (the slice failed for another reason than memory or time)."""


class Recorder:
    """Wraps the collectors' prepare so every step (warm-up included) is timed here too, and the
    budget is enforced here, between steps: at the deadline during warm-up; after warm-up, when 10
    measured steps would pass it (the last warm-up step's time x 10); and at the deadline during
    the measured steps (keeping them). Building the model and a step in progress are not cut."""

    def __init__(
        self, base: Callable[..., Any], clock: Callable[[], float], deadline: float, warmup: int
    ) -> None:
        self.base, self.clock, self.deadline, self.warmup = base, clock, deadline, warmup
        self.times: list[float] = []
        self.facts: dict[str, Any] = {}

    def prepare(self, config: Any, device: Any) -> Any:
        prepared = self.base(config, device)
        inner, dev = prepared.step, prepared.device

        def step() -> None:
            t0 = self.clock()
            inner()
            dev.synchronize()
            self.times.append(self.clock() - t0)
            now = self.clock()
            if (
                now > self.deadline and len(self.times) <= self.warmup
            ):  # a step is never cut; the next is not run
                raise slices.BudgetExhausted("the budget was spent during warm-up")
            if len(self.times) == self.warmup and now + self.times[-1] * MIN_MEASURED_STEPS > self.deadline:
                raise slices.BudgetExhausted(f"{MIN_MEASURED_STEPS} measured steps would pass the budget")
            if len(self.times) > self.warmup and now > self.deadline:
                raise slices.BudgetExhausted("the budget was spent during the measured steps")

        prepared.step = step
        self.facts = prepared.facts
        return prepared


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def host_spec(fingerprint: Any, device_kind: str) -> Any:
    return get_gpu("cpu" if device_kind == "cpu" else fingerprint.gpu)


def analyse(times: list[float], warmup: int, confidence: float) -> tuple[int, tuple[float, float, float]]:
    """(warm-up steps, mean step time with interval) of all recorded step times."""
    intervals = [(1, t) for t in times]
    k = max(warmup, eta.warmup_intervals(intervals))
    if len(times) - k < MIN_MEASURED_STEPS:
        k = warmup
    est = eta.estimate_remaining(intervals[k:], None, None, confidence)
    assert est is not None  # >= 2 intervals
    return k, est.step_time_s


def initial_limits(device: Any, seconds_left: float, steps: int, warmup: int, notes: list[str]) -> Limits:
    return Limits(
        memory_gb=max(device.total_memory_gb, 0.0) * MEMORY_FRACTION,
        max_step_s=max(seconds_left, 0.0) * STEP_BUDGET_FRACTION / (warmup + steps),
        supports=device.supports,
        notes=notes,
    )


def measure_probe(
    plan_args: dict[str, Any],
    dev: Any,
    *,
    clock: Callable[[], float],
    deadline: float,
    budget_s: float,
    prepare: Callable[..., Any] | None,
    notes: list[str],
) -> tuple[ProbePlan, Recorder, Any, str]:
    """Plan and run until a probe measured (or the budget / Ctrl-C stopped it)."""
    limits: Limits = plan_args.pop("limits")
    plan = choose_plan(limits=limits, **plan_args)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        recorder = Recorder(prepare or slices.prepare_slice, clock, deadline, plan.config.warmup_steps)
        try:  # the recorder enforces the budget (run_slice's own projection would refuse 10 of 50 steps)
            measurement, _ = slices.run_slice(plan.config, device=dev, prepare=recorder.prepare, clock=clock)
        except slices.BudgetExhausted:
            if len(recorder.times) - plan.config.warmup_steps >= MIN_MEASURED_STEPS:
                notes.append(
                    f"the budget ended the measured steps after {len(recorder.times) - plan.config.warmup_steps}"
                )
                return plan, recorder, None, "budget"
            left = deadline - clock()
            if (
                not recorder.times
                or attempt == MAX_ATTEMPTS
                or left < 0.25 * budget_s
                or plan.predicted_step_s is None
            ):
                notes.append("the budget ran out before 10 steps were measured: the prediction stands")
                return plan, recorder, None, "budget"
            est, high = plan.predicted_step_s[0], plan.predicted_step_s[2]
            slower = recorder.times[-1] / est  # real / predicted on this host
            allowed = left * STEP_BUDGET_FRACTION / (plan.config.warmup_steps + plan.config.measured_steps)
            # choose_plan compares the predicted high end: real ~ slower x estimate must fit `allowed`
            limits = dataclasses.replace(limits, max_step_s=allowed / max(slower, 1e-9) * high / est)
            try:
                plan = choose_plan(limits=limits, **plan_args)
            except UnsupportedError:
                notes.append(
                    f"steps took {slower:.1f}x the predicted time and no smaller probe fits the budget left: "
                    "the prediction stands"
                )
                return plan, recorder, None, "budget"
            notes.append(
                f"attempt {attempt}: steps took {slower:.1f}x the predicted time on this host; planned again smaller"
            )
            continue
        except KeyboardInterrupt:
            return plan, recorder, None, "interrupted"
        if measurement.status == "oom" and attempt < MAX_ATTEMPTS:
            notes.append(
                f"attempt {attempt}: out of memory ({measurement.notes}); planned again with half the memory"
            )
            limits = dataclasses.replace(limits, memory_gb=limits.memory_gb / 2)
            plan = choose_plan(limits=limits, **plan_args)
            continue
        if measurement.status != "ok":
            raise ProbeError(f"the probe could not run: {measurement.status}: {measurement.notes}")
        return plan, recorder, measurement, "complete"
    raise ProbeError("the probe did not fit this machine after several attempts")  # pragma: no cover
