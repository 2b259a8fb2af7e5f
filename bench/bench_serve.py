"""Latency of the prediction service: a real `perfmodel serve --workers N` (uvicorn; default one
process per core) on a local port, 1,000 POST /v1/predict over 8 concurrent connections (httpx
async client, on the same host), p50 / p99 latency and errors. Two mixes, 1,000 requests each:
  distinct  - every request a different run (GPU x count x micro-batch x sequence length x
              tokens): no answer can come from the server's cache, each is a full prediction;
              run --repeats times (default 3, other data amounts each time) and the round with
              the median p50 reported, with every round's p50 (a shared host is noisy);
  repeated  - 50 different runs asked 20 times each, in random order (a page or a scheduler
              asking again): the first ask of each is computed, the rest are cache hits.

Target: p50 < 20 ms, zero errors. Prints one JSON line.

    python bench/bench_serve.py [--requests 1000] [--concurrency 8] [--workers N] [--repeats 3]
    python bench/bench_serve.py --in-process      # the prediction per request, no HTTP
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_gpu

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
TARGET_P50_MS = 20.0
GPUS = ("A100-80GB", "A100-40GB", "H100-SXM", "A10G", "L40S", "H200")  # all run the example's bf16
COUNTS = (1, 2, 4, 8, 16, 32)
BATCHES = (1, 2, 4, 8, 16, 32)
SEQ_LENS = (256, 512, 1024, 2048, 4096)


def bodies(n: int, distinct: int, seed: int = 0, tokens: float = 5e8) -> list[dict[str, Any]]:
    """`n` request bodies drawn from `distinct` different runs of the bundled example."""
    config = EXAMPLE.read_text()
    grid = list(itertools.product(GPUS, COUNTS, BATCHES, SEQ_LENS))
    rng = random.Random(seed)
    rng.shuffle(grid)
    runs = []
    for i in range(distinct):
        gpu, count, batch, seq = grid[i % len(grid)]
        runs.append(
            {
                "config": config,
                "gpu": gpu,
                "num_gpus": count,
                "tokens": tokens + 1e6 * (i // len(grid)),
                "set": {
                    "training.micro_batch_size": batch,
                    "training.seq_len": seq,
                    "hardware.strategy": "fsdp" if count > 1 else "ddp",
                    # the example states num_nodes: 1, which cannot hold 16 or 32 GPUs (a ConfigError,
                    # 422): the nodes the config would derive for the count
                    "hardware.num_nodes": get_gpu(gpu).servers_for(count),
                },
            }
        )
    out = [runs[i % distinct] for i in range(n)]
    rng.shuffle(out)
    return out


async def load(url: str, requests: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    import httpx

    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in requests:
        queue.put_nowait(body)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    hits = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal hits
        while not queue.empty():
            body = queue.get_nowait()
            start = time.perf_counter()
            try:
                response = await client.post(url + "/v1/predict", json=body)
                elapsed = time.perf_counter() - start
                if response.status_code != 200:
                    errors[str(response.status_code)] = errors.get(str(response.status_code), 0) + 1
                    continue
                hits += response.headers.get("X-Perfmodel-Cache") == "hit"
                latencies.append(elapsed)
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    started = time.perf_counter()
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    wall = time.perf_counter() - started
    ms = sorted(x * 1000 for x in latencies)
    return {
        "requests": len(requests),
        "p50_ms": round(statistics.median(ms), 1) if ms else None,
        "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 1) if ms else None,
        "max_ms": round(ms[-1], 1) if ms else None,
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "cache_hits": hits,
        "requests_per_s": round(len(requests) / wall, 1),
        "ok": bool(ms) and not errors and statistics.median(ms) < TARGET_P50_MS,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def in_process(n: int = 200, warm: int = 30) -> dict[str, Any]:
    """What the server computes per request, without HTTP: `predict_document` (the body of
    /v1/predict) timed on `n` requests of the distinct mix after `warm` untimed ones, split by
    whether the run fits in memory (a run that does not carries `fit_suggestions`, each with its own
    prediction)."""
    import yaml

    from perfmodel.api import predict_document
    from perfmodel.request import RunRequest

    def one(body: dict[str, Any]) -> dict[str, Any]:
        options = {k: body[k] for k in ("gpu", "num_gpus", "tokens", "set")}
        return predict_document(RunRequest.of(yaml.safe_load(body["config"]), **options))

    mix = bodies(warm + n, warm + n, seed=1)
    for body in mix[:warm]:
        one(body)
    ms: dict[str, list[float]] = {"fits": [], "does not fit": []}
    for body in mix[warm:]:
        start = time.perf_counter()
        doc = one(body)
        ms["does not fit" if doc.get("fit_suggestions") else "fits"].append((time.perf_counter() - start) * 1000)
    return {
        "bench": "serve_in_process",
        "requests": n,
        **{f"{k}: n": len(v) for k, v in ms.items()},
        **{f"{k}: median_ms": round(statistics.median(v), 2) for k, v in ms.items() if v},
        "all: median_ms": round(statistics.median(ms["fits"] + ms["does not fit"]), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rounds of the distinct mix; the round with the median p50 is reported",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(os.cpu_count() or 1, 8),
        help="server processes (default: one per core)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="time the prediction each request computes, without a server (fits / does not fit)",
    )
    args = parser.parse_args()
    if args.in_process:
        print(json.dumps(in_process()))
        return 0
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            json.dumps(
                {"bench": "serve", "skipped": f"{exc.name} is not installed (pip install -e '.[serve,dev]')"}
            )
        )
        return 0
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--no-access-log",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                print(
                    json.dumps(
                        {
                            "bench": "serve",
                            "skipped": "the server did not start",
                            "stderr": (server.stderr.read() if server.stderr else "")[-500:],
                        }
                    )
                )
                return 0
            time.sleep(0.2)
        kind = httpx.get(url + "/v1/model", timeout=10).json()["model"]["kind"]
        asyncio.run(
            load(
                url, bodies(8 * args.concurrency, 8 * args.concurrency, seed=99, tokens=1e8), args.concurrency
            )
        )  # warm-up: every worker process has loaded its model
        rounds = [
            asyncio.run(
                load(
                    url, bodies(args.requests, args.requests, seed=1, tokens=5e8 + 1e9 * i), args.concurrency
                )
            )
            for i in range(args.repeats)
        ]  # other data amounts each round: no answer is in the cache
        distinct = sorted(rounds, key=lambda r: r["p50_ms"] if r["p50_ms"] is not None else float("inf"))[
            len(rounds) // 2
        ]  # the round with the median p50
        distinct["p50_ms_rounds"] = [r["p50_ms"] for r in rounds]
        distinct["errors"] = sum(r["errors"] for r in rounds)
        distinct["ok"] = distinct["ok"] and not distinct["errors"]
        repeated = asyncio.run(load(url, bodies(args.requests, 50, seed=2, tokens=7e8), args.concurrency))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    print(
        json.dumps(
            {
                "bench": "serve",
                "concurrency": args.concurrency,
                "workers": args.workers,
                "model_kind": kind,
                "target_p50_ms": TARGET_P50_MS,
                "distinct": distinct,
                "repeated": repeated,
                "cpus": os.cpu_count(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
