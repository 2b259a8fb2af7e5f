"""Progress intervals, (steps, seconds) between two progress reports, in two numpy arrays: 16
bytes an interval (12 while every count fits 32 bits) where a list of tuples takes about 90, so a
run of 10 million steps is read, replayed and summarised in a few hundred MB.

`Intervals` is a read-mostly sequence of `(int, float)` pairs (iterating, indexing and comparing
with a list work as on a list of tuples); slicing gives a view, `append` grows it in place
(amortised), and `steps` / `seconds` / `per_step()` give the arrays to compute on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

_INT32_MAX = np.iinfo(np.int32).max


def _steps_array(values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    return arr


class Intervals(Sequence[tuple[int, float]]):
    """(steps, seconds) intervals; steps >= 1 and seconds >= 0 are the readers' job."""

    __slots__ = ("_n", "_seconds", "_steps")

    def __init__(self, steps: Any = None, seconds: Any = None) -> None:
        steps_arr = _steps_array(np.empty(0, np.int32) if steps is None else steps)
        seconds_arr = np.asarray(np.empty(0) if seconds is None else seconds, dtype=np.float64)
        if steps_arr.ndim != 1 or steps_arr.shape != seconds_arr.shape:
            raise ValueError(
                f"Intervals needs two 1-d arrays of one length; got {steps_arr.shape}, {seconds_arr.shape}"
            )
        self._steps, self._seconds, self._n = steps_arr, seconds_arr, len(steps_arr)

    @classmethod
    def of(cls, intervals: Iterable[tuple[int, float]]) -> Intervals:
        """`intervals` as Intervals (itself when it already is)."""
        if isinstance(intervals, Intervals):
            return intervals
        pairs = list(intervals)
        if not pairs:
            return cls()
        steps, seconds = zip(*pairs, strict=True)
        return cls(np.array(steps, dtype=np.int64), np.array(seconds, dtype=np.float64))

    @classmethod
    def concat(cls, steps: list[np.ndarray], seconds: list[np.ndarray]) -> Intervals:
        """Intervals from chunks of arrays (the lists are emptied as they are joined, so the peak is
        one copy plus the chunks of one array); steps kept in 32 bits where they fit."""
        joined_steps = np.concatenate(steps) if steps else np.empty(0, np.int64)
        steps.clear()
        if joined_steps.dtype != np.int32 and joined_steps.size and int(joined_steps.max()) <= _INT32_MAX:
            joined_steps = joined_steps.astype(np.int32)
        joined_seconds = np.concatenate(seconds) if seconds else np.empty(0)
        seconds.clear()
        return cls(joined_steps, joined_seconds)

    @property
    def steps(self) -> np.ndarray:
        """Steps of each interval (a view)."""
        return self._steps[: self._n]

    @property
    def seconds(self) -> np.ndarray:
        """Seconds of each interval (a view)."""
        return self._seconds[: self._n]

    def per_step(self) -> np.ndarray:
        """Mean step time of each interval in s (a new array)."""
        return self.seconds / self.steps

    def total_steps(self) -> int:
        return int(self.steps.sum(dtype=np.int64))

    def total_seconds(self) -> float:
        return float(self.seconds.sum())

    def append(self, steps: int, seconds: float) -> None:
        """One more interval (the arrays grow by half when full; a view is copied first)."""
        if self._n == len(self._steps) or (steps > _INT32_MAX and self._steps.dtype != np.int64):
            capacity = max(16, self._n + self._n // 2 + 1)
            dtype = np.int64 if steps > _INT32_MAX else self._steps.dtype
            grown_steps = np.empty(capacity, dtype=dtype)
            grown_steps[: self._n] = self.steps
            grown_seconds = np.empty(capacity)
            grown_seconds[: self._n] = self.seconds
            self._steps, self._seconds = grown_steps, grown_seconds
        self._steps[self._n] = steps
        self._seconds[self._n] = seconds
        self._n += 1

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> tuple[int, float]: ...

    @overload
    def __getitem__(self, index: slice) -> Intervals: ...

    def __getitem__(self, index: int | slice) -> tuple[int, float] | Intervals:
        if isinstance(index, slice):
            return Intervals(self.steps[index], self.seconds[index])
        i = range(self._n)[index]  # IndexError and negative indices as a list has them
        return int(self._steps[i]), float(self._seconds[i])

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.steps.tolist(), self.seconds.tolist(), strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Intervals):
            return bool(
                np.array_equal(self.steps, other.steps) and np.array_equal(self.seconds, other.seconds)
            )
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        head = ", ".join(f"({k}, {s:g})" for k, s in self[:3])
        return f"Intervals([{head}{', ...' if self._n > 3 else ''}], n={self._n})"
