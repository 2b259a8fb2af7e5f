"""Speed target of the kernel-efficiency fit: a refit inside every training fold (the "accelerator
never seen" split leaves each accelerator's kernel rows out) must take well under 2 s on 2 cores.

Times, on the shipped kernel table (datasets/kernels): building the table's design once (cached per
table content), a cold fit on every row, and one refit per held-out accelerator. Prints one JSON
document; exits 1 when the median refit misses the target.

    python bench/bench_kernels_fit.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

TARGET_S = 2.0


def main() -> int:
    from perfmodel.kernels.fitting import _DESIGNS, fit_efficiency_table, table_design
    from perfmodel.kernels.table import load_kernel_table

    table = load_kernel_table()
    started = time.perf_counter()
    _DESIGNS.clear()
    table_design(table)
    design_s = time.perf_counter() - started
    full = fit_efficiency_table(table)
    refits = {}
    for gpu in ("H100-SXM", "A100-80GB", "B200", "T4", "MI250", "L4"):
        refits[gpu] = fit_efficiency_table(table, exclude_gpus=(gpu,)).seconds
    median = statistics.median(refits.values())
    print(json.dumps({
        "rows": int(len(table)), "rows_fitted": full.rows_used, "design_build_s": round(design_s, 3),
        "fit_all_rows_s": round(full.seconds, 3), "refit_s": {g: round(s, 3) for g, s in refits.items()},
        "median_refit_s": round(median, 3), "target_s": TARGET_S, "met": median < TARGET_S,
        "load_average": os.getloadavg()[0], "cpus": os.cpu_count(),
    }, indent=1))  # fmt: skip
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
