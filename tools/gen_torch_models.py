"""Generate partita's PyTorch test models in tests/models/pytorch/, deterministically.

    /work/venv/bin/python tools/gen_torch_models.py [--only NAME ...] [--out DIR]

Needs torch 2.13.0 (CPU) and, for the PT2E models, torchao 0.18 (installed with --no-deps).
Models are built in torch.nn (torchvision has no CPU build here), their weights initialised as
the notes on test models say (BatchNorm without centring, one variance per layer), then:
- PT2E: torch.export -> torchao prepare_pt2e / calibrate / convert_pt2e -> torch.export.save;
- float: torch.export of the float model;
- TorchScript: eager (fuse_modules / prepare / convert) or FX (prepare_fx / convert_fx)
  quantization with the fbgemm qconfig, then torch.jit.trace and save.
"""

from __future__ import annotations

import argparse
import sys
import warnings
import zlib
from pathlib import Path

import torch
from torch import nn

warnings.filterwarnings("ignore")  # quantization deprecation chatter

H = 64  # MobileNetV2 input side: 64x64 keeps the interpreter-run tests fast
N_CALIB = 16
# Convolution weights are U(-1, 1) + KERNEL_MEAN (times the He bound): low-pass kernels, as
# trained networks have. Zero-mean random kernels filter most of a smooth image out, the
# BatchNorm after them scales the rest up and the white rounding noise with it, layer after
# layer: a 1-LSB difference at the first layer grew to 25 LSB at the logits; with low-pass
# kernels every tensor of MobileNetV2 stays within 1 LSB of PyTorch.
KERNEL_MEAN = 1.0


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def images(n: int, side: int, seed: int) -> torch.Tensor:
    """Smooth random images in about [-2, 2]: low-frequency noise plus a little pixel noise."""
    g = torch.Generator().manual_seed(seed)
    low = torch.randn(n, 3, max(side // 8, 2), max(side // 8, 2), generator=g)
    up = nn.functional.interpolate(low, size=(side, side), mode="bilinear", align_corners=False)
    return up + 0.2 * torch.randn(n, 3, side, side, generator=g)


# ---- networks -------------------------------------------------------------------------------


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)
    )


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [conv_bn(cin, hidden, 1), nn.ReLU6()]
        layers += [
            conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.ReLU6(),
            conv_bn(hidden, cout, 1),
        ]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout
        self.skip = torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        y = self.body(x)
        return self.skip.add(x, y) if self.residual else y


class MobileNetV2(nn.Module):
    """A small MobileNetV2 (width ~0.35) with Quant/DeQuant stubs for eager quantization."""

    SETTINGS = ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 2, 2), (6, 32, 1, 1))
    LAST = 128  # the head's width

    def __init__(self, classes: int = 10):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        layers: list[nn.Module] = [conv_bn(3, 16, 3, 2), nn.ReLU6()]
        cin = 16
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [conv_bn(cin, self.LAST, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.LAST, classes))
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.features(self.quant(x))
        x = self.classifier(torch.flatten(self.pool(x), 1))
        return self.dequant(x)


class TorchvisionMobileNetV2(MobileNetV2):
    """torchvision's mobilenet_v2(width_mult=0.35) layer shapes (its _make_divisible channels,
    the 1280-wide head), built the eager-quantizable way: QuantStub/DeQuantStub, conv + bn
    fused, a standalone ReLU6 after each (eager mode cannot fuse it), FloatFunctional adds;
    10 classes keep the file small."""

    SETTINGS = ((1, 8, 1, 1), (6, 8, 2, 2), (6, 16, 3, 2), (6, 24, 4, 2), (6, 32, 3, 1),
                (6, 56, 3, 2), (6, 112, 1, 1))
    LAST = 1280


class OpsNet(nn.Module):
    """One small network exercising the ops the quantizers annotate: conv (+relu, relu6),
    depthwise conv, add, add + relu, max/avg pooling, concat, hardtanh, linear."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.c1 = conv_bn(3, 8, 3, 2)
        self.r1 = nn.ReLU()
        self.dw = conv_bn(8, 8, 3, 1, groups=8)
        self.r6 = nn.ReLU6()
        self.c2 = conv_bn(8, 8, 1)
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.add_relu = torch.ao.nn.quantized.FloatFunctional()
        self.mp = nn.MaxPool2d(2)
        self.ap = nn.AvgPool2d(3, 1, 1)
        self.cat = torch.ao.nn.quantized.FloatFunctional()
        self.c3 = conv_bn(16, 12, 3)
        self.ht = nn.Hardtanh(-1.0, 1.0)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(12, 6)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.r1(self.c1(self.quant(x)))
        y = self.r6(self.dw(x))
        x = self.add.add(x, self.c2(y))
        x = self.add_relu.add_relu(x, y)
        x = self.cat.cat([self.mp(x), self.ap(self.mp(x))], 1)
        x = self.ht(self.c3(x))
        return self.dequant(self.fc(torch.flatten(self.pool(x), 1)))


@torch.no_grad()
def init_weights(model: nn.Module, calib: torch.Tensor, seed: int) -> None:
    """The notes' initialisation, one BatchNorm at a time in forward order: mean 0 (no
    centring), variance = the layer-wide mean second moment of its input, gamma ~ U(0.5, 1.5),
    beta ~ N(0, 0.1); low-pass convolution kernels (KERNEL_MEAN); a non-zero classifier bias
    that centres the logits."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            # He-uniform keeps activations alive; a wider classifier makes the logits depend
            # on the input more than on the bias, so that top-1 varies between inputs.
            bound = (6.0 / (m.weight[0].numel())) ** 0.5 * (2 if isinstance(m, nn.Linear) else 1)
            u = torch.rand(m.weight.shape, generator=g) * 2 - 1
            m.weight.copy_((u + (KERNEL_MEAN if isinstance(m, nn.Conv2d) else 0)) * bound)
            if m.bias is not None:
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    model.eval()
    for bn in [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]:
        x = _input_of(model, bn, calib)
        bn.running_mean.zero_()
        bn.running_var.fill_(float(x.pow(2).mean()))
        bn.weight.copy_(0.5 + torch.rand(bn.weight.shape, generator=g))
        bn.bias.copy_(0.1 * torch.randn(bn.bias.shape, generator=g))
    # Centre the logits: features after ReLU6 are positive, so without this one class wins
    # for every input.
    fc = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    fc.bias.copy_(fc.bias - fc.weight @ _input_of(model, fc, calib).mean(0))


def _input_of(model: nn.Module, layer: nn.Module, calib: torch.Tensor) -> torch.Tensor:
    seen = {}
    hook = layer.register_forward_pre_hook(lambda _m, a: seen.setdefault("x", a[0]))
    model(calib)
    hook.remove()
    return seen["x"]


# ---- quantization flows ---------------------------------------------------------------------


def pt2e(
    model: nn.Module,
    example: torch.Tensor,
    calib: torch.Tensor,
    quantizer: str,
    per_channel: bool = True,
):
    """torch.export -> prepare_pt2e -> calibrate -> convert_pt2e -> torch.export."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    if quantizer == "x86":
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

        q = xiq.X86InductorQuantizer()
        q.set_global(xiq.get_default_x86_inductor_quantization_config())
    else:
        from torchao.testing.pt2e._xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        q = XNNPACKQuantizer()
        q.set_global(get_symmetric_quantization_config(is_per_channel=per_channel))
    gm = torch.export.export(model, (example,)).module()
    prepared = prepare_pt2e(gm, q)
    for i in range(len(calib)):  # the export is specialised to batch 1
        prepared(calib[i : i + 1])
    converted = convert_pt2e(prepared)
    _drop_unused_attributes(converted)
    return torch.export.export(converted, (example,))


def _drop_unused_attributes(gm: torch.fx.GraphModule) -> None:
    """The float weights convert_pt2e replaced stay attributes; drop them to keep files small."""
    used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name, _ in list(gm.named_parameters()) + list(gm.named_buffers()):
        if name not in used:
            owner, _, attr = name.rpartition(".")
            mod = gm.get_submodule(owner) if owner else gm
            delattr(mod, attr)


def torchscript(
    model: nn.Module, example: torch.Tensor, calib: torch.Tensor, mode: str,
    backend: str = "fbgemm",
):
    """Eager or FX quantization with the ``backend`` qconfig (fbgemm or x86), then
    torch.jit.trace."""
    import torch.ao.quantization as tq

    torch.backends.quantized.engine = backend
    if mode == "eager":
        model.qconfig = tq.get_default_qconfig(backend)
        tq.fuse_modules(model, _fusions(model), inplace=True)
        prepared = tq.prepare(model)
    else:
        from torch.ao.quantization.quantize_fx import prepare_fx

        prepared = prepare_fx(model, tq.get_default_qconfig_mapping(backend), (example,))
    for i in range(0, len(calib), 4):
        prepared(calib[i : i + 4])
    if mode == "eager":
        converted = tq.convert(prepared)
    else:
        from torch.ao.quantization.quantize_fx import convert_fx

        converted = convert_fx(prepared)
    return torch.jit.trace(converted, example)


def _fusions(model: nn.Module) -> list[list[str]]:
    """conv + bn (+ relu) groups for eager-mode fuse_modules."""
    out = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Sequential) and len(m) == 2 and isinstance(m[1], nn.BatchNorm2d):
            out.append([f"{name}.0", f"{name}.1"])
    if isinstance(model, OpsNet):
        out = [["c1.0", "c1.1", "r1"], ["dw.0", "dw.1"], ["c2.0", "c2.1"], ["c3.0", "c3.1"]]
    return out


# ---- the model list -------------------------------------------------------------------------

MODELS = {
    # name: (network, side, flow, flow arguments)
    "pt2e_x86_ops": (OpsNet, 16, "pt2e", {"quantizer": "x86"}),
    "pt2e_xnnpack_ops": (OpsNet, 16, "pt2e", {"quantizer": "xnnpack", "per_channel": False}),
    "pt2e_x86_mobilenetv2": (MobileNetV2, H, "pt2e", {"quantizer": "x86"}),
    "pt2e_xnnpack_mobilenetv2": (MobileNetV2, H, "pt2e", {"quantizer": "xnnpack"}),
    "float_ops": (OpsNet, 16, "float", {}),
    "float_mobilenetv2": (MobileNetV2, H, "float", {}),
    "ts_eager_ops": (OpsNet, 16, "torchscript", {"mode": "eager"}),
    "ts_eager_mobilenetv2": (MobileNetV2, H, "torchscript", {"mode": "eager"}),
    "ts_fx_mobilenetv2": (MobileNetV2, H, "torchscript", {"mode": "fx"}),
    # issue 16 part 3: torchvision's shapes, eager mode, the x86 backend, 96 x 96
    "ts_eager_x86_tv_mobilenetv2_035": (
        TorchvisionMobileNetV2, 96, "torchscript", {"mode": "eager", "backend": "x86"}
    ),
}


def generate(name: str, out: Path) -> Path:
    net, side, flow, kwargs = MODELS[name]
    torch.manual_seed(seed_of(name))
    model = net().eval()
    calib = images(N_CALIB, side, seed_of(name) + 1)
    # Weights depend on the network only, so a network's flows share them.
    init_weights(model, calib, seed_of(net.__name__))
    example = calib[:1].clone()  # a view would save all of calib with the model
    if flow == "pt2e":
        path = out / f"{name}.pt2"
        torch.export.save(pt2e(model, example, calib, **kwargs), path)
    elif flow == "float":
        path = out / f"{name}.pt2"
        torch.export.save(torch.export.export(model, (example,)), path)
    else:
        path = out / f"{name}.pt"
        torchscript(model, example, calib, **kwargs).save(str(path))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS))
    ap.add_argument("--out", type=Path, default=Path("tests/models/pytorch"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or MODELS:
        path = generate(name, args.out)
        print(f"{path} {path.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
