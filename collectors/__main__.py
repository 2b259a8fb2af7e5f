"""`python -m collectors --profile quick|gpu|full [--out DIR] [--budget-s N] [--device D] [--json]`
(what `make collect` runs); `--plan [--gpu NAME]` only projects the profile (collectors/plan.py). Progress on stderr; a summary (or JSON with --json) on stdout.
Exit status: 0 complete or budget spent, 130 interrupted, 1 on an error."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collectors", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=("quick", "gpu", "full"))
    parser.add_argument("--out", default="datasets/raw", help="shard directory (default datasets/raw)")
    parser.add_argument("--budget-s", type=float, default=None, help="wall-time budget in seconds (default: the profile's)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: a GPU if present)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--plan", action="store_true", help="only project the profile: fates, step times, total vs budget")
    parser.add_argument("--gpu", default="cpu", help="with --plan: the catalog accelerator to plan for (default: cpu, this machine)")
    parser.add_argument("--summary", action="store_true", help="only print a Markdown summary of the stored shards")
    args = parser.parse_args(argv)

    from perfmodel.errors import PerfModelError

    if args.summary:
        from collectors.summary import summarize

        sys.stdout.write(summarize(args.out) + "\n")
        return 0
    from collectors.harness import collect

    try:
        if args.plan:
            return _plan(args)
        result = collect(args.profile, out_dir=args.out, budget_s=args.budget_s, device=args.device, progress=True)
    except PerfModelError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(
            f"{result.profile} on {result.hardware_id} ({result.device}): {result.stopped} after "
            f"{result.elapsed_s:.0f} s; {result.rows_written} slice rows {result.status_counts}, "
            f"{result.microbench_rows} micro-benchmark rows, {result.skipped_existing} already measured; "
            f"{len(result.shards)} shard(s) in {result.out_dir}\n"
        )
    return 130 if result.stopped == "interrupted" else 0


def _plan(args: argparse.Namespace) -> int:
    from collectors.plan import plan_profile, plan_table

    plan = plan_profile(args.profile, args.gpu, budget_s=args.budget_s, out_dir=args.out)
    if args.json:
        sys.stdout.write(json.dumps(plan.to_dict(), indent=2) + "\n")
    else:
        from rich.console import Console

        Console(width=200).print(plan_table(plan))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
