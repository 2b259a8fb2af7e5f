"""Live ETA for the Hugging Face `Trainer`: a `transformers.TrainerCallback` over the monitor core.

    from perfmodel.monitor.hf import PerfmodelCallback
    trainer = Trainer(..., callbacks=[PerfmodelCallback()])                  # prior from the model itself
    trainer = Trainer(..., callbacks=[PerfmodelCallback(config="run.yaml")])  # or from a perfmodel config

Without a config, the prior is predicted from what the Trainer knows: the model's own config
(`model.config`, read as a Hugging Face config.json), per-device batch size, gradient accumulation,
bf16/fp16 (autocast: amp_bf16/amp_fp16), gradient checkpointing, LoRA rank (PEFT), world size, the
accelerator in use, and the sequence length (`seq_len=`, else the first training sample's
`input_ids` length). Each log entry in `state.log_history` gets `perfmodel_elapsed_s` and, once
known, `perfmodel_eta_s`, so `perfmodel monitor` can read the trainer_state.json later; the run
record goes to `output_dir/perfmodel_run.json` for `perfmodel ingest`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from perfmodel.monitor.core import EtaSnapshot
from perfmodel.monitor.display import BarReporter
from perfmodel.monitor.session import MonitorSession


def _seq_len_of(train_dataloader: Any) -> int | None:
    try:
        sample = train_dataloader.dataset[0]
        return int(len(sample["input_ids"]))
    except Exception:  # noqa: BLE001 - iterable datasets, other keys: the caller says so
        return None


def _accelerator(args: Any) -> str:
    try:
        if str(args.device.type) == "cuda":
            import torch

            from perfmodel.measure.fingerprint import gpu_catalog_key

            return gpu_catalog_key(torch.cuda.get_device_name(args.device))
    except Exception:  # noqa: BLE001
        pass
    return "cpu"


def trainer_config(model: Any, args: Any, state: Any, seq_len: int, folder: Path) -> dict[str, Any]:
    """A native perfmodel config for what a Trainer is about to run (`folder` receives the
    model's config.json)."""
    model.config.to_json_file(str(folder / "config.json"))
    precision = (
        "amp_bf16" if getattr(args, "bf16", False) else "amp_fp16" if getattr(args, "fp16", False) else "fp32"
    )
    training: dict[str, Any] = {
        "seq_len": int(seq_len),
        "micro_batch_size": int(args.per_device_train_batch_size),
        "grad_accum_steps": int(args.gradient_accumulation_steps),
        "precision": precision,
        "optimizer": "sgd" if "sgd" in str(getattr(args, "optim", "")).lower() else "adamw",
        "activation_checkpointing": bool(getattr(args, "gradient_checkpointing", False)),
        "steps": int(state.max_steps),
    }
    peft = getattr(model, "peft_config", None)
    if isinstance(peft, dict) and peft:
        r = getattr(next(iter(peft.values())), "r", None)
        if r:
            training["lora_r"] = int(r)
    name = str(
        getattr(model.config, "_name_or_path", "") or getattr(model.config, "model_type", "") or "hf-model"
    )
    return {
        "model": {"path": str(folder), "name": name},
        "training": training,
        "hardware": {"gpu": _accelerator(args), "num_gpus": int(getattr(args, "world_size", 1) or 1)},
        "framework": "hf-eager",
    }


class PerfmodelCallback(TrainerCallback):  # type: ignore[misc]
    """ETA, stable-phase statistics and bottleneck hints for a `transformers.Trainer` run.
    Keywords are those of `perfmodel.monitor.session.MonitorSession` (config, prediction, prior,
    confidence, clock, sampler, reporter, report_every_s, record_path, ...); `seq_len` sizes the
    automatic prior; `record=False` writes no run record. By default the ETA is a postfix on the
    Trainer's own progress bar (perfmodel.monitor.display.BarReporter; one line of at most 100
    characters through tqdm.write with disable_tqdm); `verbose=True` adds the detail lines (None:
    the PERFMODEL_VERBOSE environment variable, perfmodel.monitor.report.resolve_verbose)."""

    def __init__(
        self,
        config: Any = None,
        *,
        seq_len: int | None = None,
        record: bool = True,
        verbose: bool | None = None,
        **session: Any,
    ) -> None:
        self.seq_len = seq_len
        self.record = record
        self._record_path = session.pop("record_path", None)
        if session.get("reporter") is None:
            session["reporter"] = BarReporter(verbose=verbose)
        self.session = MonitorSession(
            source="hf-trainer", config=config, framework="hf-eager", verbose=verbose, **session
        )
        self.last: EtaSnapshot | None = None
        self.final: EtaSnapshot | None = None

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, train_dataloader: Any = None, **kw: Any
    ) -> None:
        if self.record:
            self.session.record_path = self._record_path or args.output_dir
        with tempfile.TemporaryDirectory(prefix="perfmodel-hf-") as tmp:
            if (
                not self.session.has_prior_source
                and model is not None
                and getattr(model, "config", None) is not None
            ):
                seq = self.seq_len or _seq_len_of(train_dataloader)
                if seq:
                    self.session.use_config(trainer_config(model, args, state, seq, Path(tmp)))
            self.session.begin(
                total_steps=int(state.max_steps) if state.max_steps else None,
                start_step=int(state.global_step),
            )
        if not self.session.has_prior_source:
            self.session.info.notes.append("no seq_len given and none found in the training data: no prior")

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        snap = self.session.update(int(state.global_step))
        if snap is not None:
            self.last = snap

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not state.log_history or not self.session.monitor.started:
            return
        m = self.session.monitor
        entry = state.log_history[-1]
        entry["perfmodel_elapsed_s"] = round(m.clock() - m.started_at, 6)
        snap = m.snapshot()
        if snap.remaining_s is not None:
            entry["perfmodel_eta_s"] = round(snap.remaining_s.estimate, 3)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        finished = bool(state.max_steps) and int(state.global_step) >= int(state.max_steps)
        self.final = self.session.end(finished=finished)
