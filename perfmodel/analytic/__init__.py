"""The analytic cost model: parameters, FLOPs, bytes, memory, communication, roofline bound.

One module per concern; `estimate(workload)` runs them all. Conventions are pinned in
`conventions.py`.
"""

from perfmodel.analytic.roofline import AnalyticEstimate, estimate

__all__ = ["AnalyticEstimate", "estimate"]
