"""Are the timm twins of Ludwig's torchvision encoders the same networks? Parameter counts compared.

perfmodel costs a Ludwig torchvision image encoder (efficientnet, convnext, regnet, ...) as the timm
model of the same architecture in its timm table (perfmodel/config/ludwig_ecd.py TORCHVISION_TIMM).
This builds each torchvision model (1,000 classes, as the table's timm models) and prints its
parameter count against the twin's, worst first.

    .venv-timm/bin/python bench/torchvision_twins.py    # the timm venv has torchvision (make timm-env)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILDERS = {
    "convnext": "convnext_{}",
    "densenet": "densenet{}",
    "efficientnet": "efficientnet_{}",
    "inceptionv3": "inception_v3",
    "mnasnet": "mnasnet{}",
    "mobilenetv2": "mobilenet_v2",
    "mobilenetv3": "mobilenet_v3_{}",
    "regnet": "regnet_{}",
    "resnext": "resnext{}",
    "swin_transformer": "swin_{}",
    "vgg": "vgg{}",
    "wide_resnet": "wide_resnet{}",
}
"""Ludwig encoder type -> torchvision.models builder name (model_variant in the braces)."""


def main() -> int:
    sys.path.insert(0, str(ROOT))
    # torchvision: the timm venv only (the project's CPU torch has no torchvision)
    import torchvision.models as tvm

    from perfmodel.config.ludwig_ecd import TORCHVISION_TIMM

    with (ROOT / "perfmodel" / "catalog" / "timm_models.csv").open(encoding="utf-8") as fh:
        table = {r["model"]: float(r["params_total"]) for r in csv.DictReader(fh)}
    rows = []
    for (kind, variant), (name, _crop) in TORCHVISION_TIMM.items():
        model = getattr(tvm, BUILDERS[kind].format(variant))(num_classes=1000)
        params = sum(p.numel() for p in model.parameters())
        rows.append((abs(params / table[name] - 1.0), kind, variant, name, params, table[name]))
    rows.sort(reverse=True)
    for off, kind, variant, name, params, twin in rows:
        print(f"{off:7.1%}  {kind} {variant} -> timm {name}: torchvision {params:,}, timm {twin:,.0f}")
    print(f"{len(rows)} twins; median difference {sorted(r[0] for r in rows)[len(rows) // 2]:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
