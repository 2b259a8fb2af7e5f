"""When a trained model may replace the champion: a pure decision over numbers already measured.

A new model becomes the champion when `force` is given (`--force-champion`); otherwise only when
  * its headline beats the kernel model alone on the same held-out folds
    (`metrics.KERNEL_ALONE_METRIC`: the analytic step time with no learned residual): a residual
    that does not beat it there adds nothing a user would gain on a job it never saw; and
  * there is no champion yet, or
  * both were evaluated on identical rows (the same dataset hash): metrics over different rows
    are not comparable, however they differ; and
  * its headline metric (`metrics.HEADLINE_METRIC`: the mean of the leave-one-source-out (1 GPU /
    1 node) and leave-one-hardware-out median APEs, lower is better) beats the
    champion's by more than the seed-to-seed spread (max - min of the headline over seeds,
    `perfmodel.learn.spread`): a smaller gain is what reseeding the same model gives.
The same rule decides whether `--export` may replace the model in models/.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """The model that asks to become the champion."""

    label: str
    """How to name it in messages (e.g. 'version 4')."""
    headline_pct: float | None
    """Its headline metric (percent; lower is better)."""
    dataset_sha256: str
    """Hash of the rows it was evaluated on."""
    kernel_alone_pct: float | None = None
    """The kernel model alone's headline on the same folds (percent), None if not recorded."""


@dataclass(frozen=True, kw_only=True)
class Incumbent:
    """The current champion (or the model an export would replace)."""

    label: str
    """How to name it in messages (e.g. 'champion version 3')."""
    headline_pct: float | None
    """Its headline metric (percent), None if unknown."""
    dataset_sha256: str | None
    """Hash of the rows it was evaluated on, None if unknown."""


@dataclass(frozen=True, kw_only=True)
class ChampionDecision:
    """The verdict and everything it was based on."""

    promote: bool
    """The candidate becomes the champion."""
    reason: str
    """One sentence saying why (shown by `perfmodel train`, logged with the run)."""
    gain_pct: float | None
    """Incumbent headline - candidate headline, in percentage points (None if not comparable)."""
    spread_pct: float | None
    """The seed-to-seed spread the gain was held against (None if it played no part)."""
    same_rows: bool | None
    """Both were evaluated on the same rows (None when there is no incumbent)."""


def comparable_gain(candidate: Candidate, incumbent: Incumbent | None) -> float | None:
    """The candidate's gain over the incumbent when the two are comparable (same rows, both
    metrics known), else None. Positive = the candidate is better."""
    if incumbent is None or incumbent.dataset_sha256 != candidate.dataset_sha256:
        return None
    if incumbent.headline_pct is None or candidate.headline_pct is None:
        return None
    return incumbent.headline_pct - candidate.headline_pct


def needs_spread(candidate: Candidate, incumbent: Incumbent | None, *, force: bool = False) -> bool:
    """Whether `decide_champion` would look at the seed spread (so it is worth measuring)."""
    gain = comparable_gain(candidate, incumbent)
    return not force and gain is not None and gain > 0


def decide_champion(
    candidate: Candidate,
    incumbent: Incumbent | None,
    *,
    spread_pct: float | None,
    force: bool = False,
) -> ChampionDecision:
    """The decision of the module docstring. `spread_pct` is the seed-to-seed range of the
    headline metric on these rows (None when not measured: then no gain is enough)."""
    behind = _behind_kernel_alone(candidate)
    if incumbent is None:
        reason = ("--force-champion: " if force else "") + behind if behind else "no champion yet"
        return ChampionDecision(
            promote=force or not behind, reason=reason, gain_pct=None, spread_pct=None, same_rows=None
        )
    same_rows = incumbent.dataset_sha256 == candidate.dataset_sha256
    gain = comparable_gain(candidate, incumbent)
    judged = force or (gain is not None and gain > 0)  # only then does the spread play a part
    promote, reason = _verdict(
        candidate, incumbent, gain, spread_pct, force=force, same_rows=same_rows, behind=behind
    )
    return ChampionDecision(
        promote=promote,
        reason=reason,
        gain_pct=gain,
        spread_pct=spread_pct if judged else None,
        same_rows=same_rows,
    )


def _points(value: float) -> str:
    """Percentage points in words: two decimals, or two significant digits below 0.01 (a spread of
    5e-4 points is not '0.00')."""
    return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.1e}"


def _behind_kernel_alone(candidate: Candidate) -> str:
    """Why the candidate does not beat the kernel model alone on its held-out folds ('' if it does
    or either number is unknown)."""
    mine, kernel = candidate.headline_pct, candidate.kernel_alone_pct
    if mine is None or kernel is None or mine < kernel:
        return ""
    return (
        f"{candidate.label} does not beat the kernel model alone on the held-out splits "
        f"({mine:.2f}% vs {kernel:.2f}%): its learned residual adds nothing there"
    )


def _verdict(
    candidate: Candidate,
    incumbent: Incumbent,
    gain: float | None,
    spread_pct: float | None,
    *,
    force: bool,
    same_rows: bool,
    behind: str,
) -> tuple[bool, str]:
    new, old = candidate.label, incumbent.label
    if force:
        return True, f"--force-champion: replaces {old} without comparing"
    if behind:  # `_behind_kernel_alone`'s reason
        return False, behind
    if not same_rows:
        theirs = (incumbent.dataset_sha256 or "unknown")[:8]
        return False, (
            f"{old} was evaluated on different rows (dataset {theirs}, this run {candidate.dataset_sha256[:8]}): "
            f"the metrics are not comparable; use --force-champion to replace it anyway"
        )
    if gain is None:
        return False, f"{old} or {new} has no headline metric to compare"
    if gain <= 0:
        return (
            False,
            f"{new} does not beat {old} ({candidate.headline_pct:.2f}% vs {incumbent.headline_pct:.2f}%)",
        )
    if spread_pct is None:
        return False, f"{new} gains {_points(gain)} points but no seed spread was measured to judge it"
    if gain <= spread_pct:
        return False, (
            f"{new} gains {_points(gain)} points over {old}, within the seed-to-seed spread of "
            f"{_points(spread_pct)} points: not evidence of a better model"
        )
    return True, (
        f"{new} beats {old} by {_points(gain)} points, more than the seed-to-seed spread of "
        f"{_points(spread_pct)} points, on the same rows"
    )
