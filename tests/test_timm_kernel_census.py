"""The kernel census of the timm sweep (collectors/public/timm_kernel_census.py): what it counts,
checked on modules whose kernels are known, and the table the timm importer reads."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from collectors.public.timm import KERNEL_CENSUS, census_columns, measured_gemm_layers  # noqa: E402
from collectors.public.timm_kernel_census import count_step  # noqa: E402


def _step(model):
    model = model.to("meta").train()
    x = torch.randn(2, 3, 8, 8, device="meta")
    y = torch.randint(0, 10, (2,), device="meta")
    return count_step(model, x, y)


def test_a_conv_bn_relu_classifier_runs_two_gemms_and_one_norm_a_forward():
    """Conv2d (aten.convolution), BatchNorm2d (one norm), ReLU, a flatten (a view: no kernel) and a
    Linear (aten.addmm): 2 GEMMs, 1 norm; the views and the flatten are not counted, so the forward
    has fewer operators than modules and operators the model runs."""
    nn = torch.nn
    counts = _step(
        nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(256, 10)
        )
    )
    assert counts["forward_gemm"] == 2
    assert counts["forward_norm"] == 1
    # convolution, the batch norm's num_batches_tracked += 1, batch norm, relu, addmm, then the
    # loss: log_softmax and nll_loss
    assert counts["forward_ops"] == 7
    assert counts["backward_ops"] > counts["forward_gemm"]
    assert counts["params_m"] == pytest.approx((3 * 4 * 9 + 4 + 8 + 256 * 10 + 10) / 1e6, abs=1e-3)


def test_a_depthwise_convolution_is_counted_apart_with_its_flops_and_what_it_streams():
    """A depthwise 3x3 (groups = channels = 4) on 8x8 images: 4 x 8 x 8 = 256 outputs a sample,
    each 2 x 1 x 9 = 18 FLOPs: 4,608 FLOPs; it reads 256 inputs and writes 256 outputs a sample.
    The pointwise 1x1 after it is a dense GEMM and not counted there."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Flatten(), nn.Linear(256, 10)
    )
    counts = _step(model)
    assert counts["forward_gemm"] == 3
    assert counts["grouped_conv_layers"] == 1
    assert counts["grouped_conv_gflops"] == pytest.approx(4608 / 1e9)
    assert counts["grouped_conv_melements"] == pytest.approx(512 / 1e6)
    assert counts["depthwise_conv_layers"] == 1
    assert counts["depthwise_conv_gflops"] == pytest.approx(4608 / 1e9)
    assert counts["depthwise_conv_melements"] == pytest.approx(512 / 1e6)


def test_a_grouped_convolution_with_several_channels_a_group_is_not_depthwise():
    """groups = 2 over 4 channels (2 input channels a group: a small GEMM per group, as cuDNN runs
    ResNeXt's and RegNet's) is grouped, not depthwise: 256 outputs x 2 x 2 x 9 = 9,216 FLOPs."""
    nn = torch.nn
    counts = _step(nn.Sequential(nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 3, padding=1, groups=2), nn.Flatten(), nn.Linear(256, 10)))
    assert counts["grouped_conv_layers"] == 1
    assert counts["grouped_conv_gflops"] == pytest.approx(9216 / 1e9)
    assert counts["depthwise_conv_layers"] == 0 and counts["depthwise_conv_melements"] == 0


def test_an_attention_is_two_batched_matmuls_and_a_softmax_over_its_scores():
    """One head of 16 queries (4x4 patches of width 8) attending to themselves: q k^T is a bmm of
    2 x 16 x 16 outputs over 8 (4,096 FLOPs a sample), p v one of 16 x 8 outputs over 16 (4,096): 8,192
    FLOPs and 256 scores a sample; q, k, v and the head come from linear layers (mm/addmm, not
    attention)."""
    nn = torch.nn

    class Attend(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, 8, 2, stride=2)
            self.qkv = nn.Linear(8, 24)
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            t = self.embed(x).flatten(2).transpose(1, 2)  # (B, 16, 8)
            q, k, v = self.qkv(t).chunk(3, dim=-1)
            return self.head((torch.bmm(q, k.transpose(1, 2)).softmax(-1) @ v).mean(1))

    counts = _step(Attend())
    assert counts["attention_bmm"] == 2 and counts["attention_softmax"] == 1
    assert counts["attention_gflops"] == pytest.approx(8192 / 1e9)
    assert counts["attention_mscores"] == pytest.approx(256 / 1e6)
    assert counts["forward_gemm"] == 5  # the patch conv, qkv, two bmm, head


def test_a_view_is_not_a_kernel_but_an_in_place_op_is():
    nn = torch.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(192, 10)

        def forward(self, x):
            return self.fc(x.permute(0, 2, 3, 1).reshape(x.shape[0], -1).relu_())

    counts = _step(M())
    # permute: a view; reshape of a non-contiguous tensor: one copy (aten.clone, then _unsafe_view:
    # no kernel); relu_ (in place: a kernel); addmm; the loss's two
    assert counts["forward_gemm"] == 1
    assert counts["forward_ops"] == 5


def test_the_importer_reads_resnet50s_count_and_refuses_a_model_of_another_size():
    """ResNet-50 at 224 px: 53 convolutions (the stem, 3 per bottleneck x 16, 4 strided shortcuts)
    and the classifier, 54 GEMMs (torchvision's and timm's architecture; tests/test_step_plan.py
    counts the convolutions in the layer-by-layer plan)."""
    assert KERNEL_CENSUS.is_file()
    assert measured_gemm_layers("resnet50", 224, 25.557) == 54
    assert measured_gemm_layers("resnet50", 224, 44.5) is None  # not the model counted
    assert measured_gemm_layers("not_a_model", 224, 1.0) is None


def test_the_importer_splits_the_grouped_convolutions_into_depthwise_and_grouped_columns():
    """The feature-table columns of three counted models, against their hand counts (the plan's
    tests in tests/test_step_plan.py work the same numbers): EfficientNet-B0 at 224 px has 16
    depthwise convolutions (one per MBConv block) reading and writing 6,094,816 elements an image and
    no other grouped one; ResNeXt-50 32x4d has 16 grouped ones (32 groups, 4-32 channels each), 462.4
    MFLOPs and 6,573,056 elements, and no depthwise one; ResNet-50 has neither."""
    b0 = census_columns("efficientnet_b0", 224, 5.289)
    assert b0["gemm_layers"] == 82 and b0["depthwise_layers"] == 16
    assert b0["depthwise_melements_per_sample"] == pytest.approx(6.094816, rel=1e-5)
    assert "grouped_layers" not in b0
    x50 = census_columns("resnext50_32x4d", 224, 25.029)
    assert x50["grouped_layers"] == 16 and "depthwise_layers" not in x50
    assert x50["grouped_gflops_per_sample"] == pytest.approx(0.4624220, rel=1e-5)
    assert x50["grouped_melements_per_sample"] == pytest.approx(6.573056, rel=1e-5)
    assert census_columns("resnet50", 224, 25.557) == {"gemm_layers": 54}
