"""What Ludwig's `batch_size: auto` tuner picks on this CPU, repeated: runs/tuner_repeats.json.

Run with the Ludwig venv:  .venv-ludwig/bin/python tune_only.py [REPEATS]

For each config (batch_size forced to auto): preprocess the dataset, build the model and the
trainer exactly as LudwigModel.train does (ludwig/api.py: LudwigModel.train ->
_tune_batch_size_and_grad_accum), then call Trainer.tune_batch_size(tune_for_training=True)
REPEATS times on the same model, recording the choice, the time it took and the tuner's
per-trial throughputs (its own log lines). Nothing is trained.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CASES = [
    ("ecd_tab_concat", "configs/ecd_tab_concat.yaml", "data/tabular_2000.csv"),
    ("ecd_tab_default_combiner", "configs/ecd_tab_default_combiner.yaml", "data/tabular_2000.csv"),
    ("ecd_image_stacked_cnn", "configs/ecd_image_stacked_cnn.yaml", "data/images_2000.csv"),
    ("ecd_text_parallel_cnn", "configs/ecd_text_parallel_cnn.yaml", "data/text_2000.csv"),
]


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    import yaml
    from ludwig.api import LudwigModel
    from ludwig.utils.backward_compatibility import upgrade_config_dict_to_latest_version  # noqa: F401

    lines: list[str] = []

    class H(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    tl = logging.getLogger("ludwig.utils.batch_size_tuner")
    tl.setLevel(logging.INFO)
    tl.addHandler(H())
    tl.propagate = False

    out = {"load_avg_start": os.getloadavg(), "cases": {}}
    for name, cfg_path, ds in CASES:
        cfg = yaml.safe_load(Path(cfg_path).read_text())
        cfg.setdefault("trainer", {})["batch_size"] = "auto"
        ds_p = Path(ds)
        for p in list(ds_p.parent.glob(ds_p.stem + ".*.hdf5")) + list(ds_p.parent.glob(ds_p.stem + ".meta.json")):
            p.unlink()
        model = LudwigModel(cfg, logging_level=logging.WARNING)
        pre = model.preprocess(dataset=ds, skip_save_processed_input=True)
        from ludwig.features.feature_registries import update_config_with_metadata, update_config_with_model

        update_config_with_metadata(model.config_obj, pre.training_set_metadata)
        model.model = LudwigModel.create_model(model.config_obj)
        update_config_with_model(model.config_obj, model.model)
        trials = []
        with model.backend.create_trainer(
            model=model.model, config=model.config_obj.trainer, skip_save_model=True, skip_save_progress=True,
            skip_save_log=True,
        ) as trainer:
            for i in range(repeats):
                lines.clear()
                t0 = time.perf_counter()
                bs = trainer.tune_batch_size(model.config_obj, pre.training_set, tune_for_training=True)
                trials.append(
                    {"chosen": bs, "s": round(time.perf_counter() - t0, 3), "log": list(lines),
                     "load_avg": os.getloadavg()[0]}
                )
                print(name, i, bs, trials[-1]["s"], flush=True)
        out["cases"][name] = {"train_rows": len(pre.training_set), "trials": trials}
        for p in list(ds_p.parent.glob(ds_p.stem + ".*.hdf5")) + list(ds_p.parent.glob(ds_p.stem + ".meta.json")):
            p.unlink()
    out["load_avg_end"] = os.getloadavg()
    Path("runs_tuner").mkdir(exist_ok=True)
    Path("runs_tuner/tuner_repeats.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
