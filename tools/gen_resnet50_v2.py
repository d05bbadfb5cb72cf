"""ResNet50 v2 (pre-activation, the geometry of the ONNX model zoo's resnet50-v2-7 that TVM's
tutorials compile) in float32 with random weights, exported by torch.onnx.export (opset 17,
NCHW input 1x3x224x224). For benchmarks only (about 100 MB): nothing is downloaded, nothing is
committed.

    python tools/gen_resnet50_v2.py OUT.onnx

Weights are He-initialised and each BatchNorm gets random inference statistics, so activations
keep their scale through the 50 layers (outputs are finite and not all equal).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn


class Unit(nn.Module):
    """BN -> ReLU -> 1x1 -> BN -> ReLU -> 3x3 (stride) -> BN -> ReLU -> 1x1, plus the shortcut
    (a 1x1 conv of the pre-activated input when the shape changes)."""

    def __init__(self, cin: int, mid: int, stride: int, project: bool):
        super().__init__()
        cout = mid * 4
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, mid, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn3, self.conv3 = nn.BatchNorm2d(mid), nn.Conv2d(mid, cout, 1, bias=False)
        self.short = nn.Conv2d(cin, cout, 1, stride, bias=False) if project else None

    def forward(self, x):
        a = torch.relu(self.bn1(x))
        shortcut = self.short(a) if self.short is not None else x
        y = self.conv1(a)
        y = self.conv2(torch.relu(self.bn2(y)))
        y = self.conv3(torch.relu(self.bn3(y)))
        return y + shortcut


class ResNet50V2(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.BatchNorm2d(3), nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
            nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        )  # fmt: skip
        units, cin = [], 64
        for mid, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                units.append(Unit(cin, mid, stride if i == 0 else 1, i == 0))
                cin = mid * 4
        self.units = nn.Sequential(*units)
        self.head = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(cin, classes))

    def forward(self, x):
        return self.head(self.units(self.stem(x)))


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = ResNet50V2()
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            m.weight.data *= 0.5  # residual sums grow with depth otherwise
        elif isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.0)
            m.bias.data.uniform_(-0.1, 0.1)
    return model.eval()


def export(path: Path, seed: int = 0) -> Path:
    model = make_model(seed)
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, (x,), str(path), opset_version=17, dynamo=False,
                      input_names=["data"], output_names=["logits"])
    return path


if __name__ == "__main__":
    export(Path(sys.argv[1]))
    print(sys.argv[1])
