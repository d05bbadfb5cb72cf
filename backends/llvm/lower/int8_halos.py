"""A convolution writes straight into the zero-point-padded input of the depthwise layer that
alone reads it (MobileNet's expand -> depthwise):

    VCONV (x -> t) ; VDW (t -> its padded copy)   =>   VCONV (x -> padded's interior) ; VDW

The depthwise kernel then only refills the border (``prepadded``) instead of copying its whole
input on one thread while the worker waits. A plan pass after the walk, as float_halos.py is
for the float products (moved out of vector_plan.py in session 25).
"""

from __future__ import annotations

from partita.backends.llvm.kinds import Kind


def _writes_pixels(conv, channels: int) -> bool:
    """Whether ``conv`` stores its output pixel by pixel, ``channels`` bytes each, in a form
    that can land in a padded image (out_pad): an int8 VCONV, or a float convolution in ONNX
    Runtime's sum order quantizing its outputs (FCONV ``quant``: a QDQ model's convolutions
    that ORT runs in float) over one image."""
    if conv.kind == Kind.VCONV:
        return conv.params["OC"] == channels
    return (conv.kind == Kind.FCONV and bool(conv.params.get("quant"))
            and conv.params["O"] == channels and conv.params["images"] == 1)


def write_into_halos(plan) -> None:
    """A convolution whose only reader is a depthwise convolution writes its output straight
    into the depthwise kernel's zero-point-padded input buffer (``out_pad``: the padded row
    width, channels, top and left border, the image's width); the depthwise kernel then only
    refills the border (``prepadded``) instead of copying its whole input (one thread's copy,
    the worker waiting: a QDQ MobileNetV2's 10 depthwise kernels after an FCONV). Needs the
    channels to be unpadded (a multiple of 16) and the value to be no output of the
    segment."""
    readers, producer = plan.links()
    for k in plan.kernels:
        if k.kind != Kind.VDW or len(k.inputs) != 2 or k.params.get("prepadded"):
            continue
        x, padded = k.inputs
        conv = producer.get(x)
        p = k.params
        if (conv is None or x in plan.outputs or readers.get(x) != 1 or not _writes_pixels(
                conv, p["Cs"]) or "out_pad" in conv.params
                or "batch" in p or "batch" in conv.params):  # one padded image at a time
            continue
        top, left = p["pad"][0], p["pad"][1]
        conv.params["out_pad"] = [p["Ws"], p["Cs"], top, left, p["W"]]
        conv.output = padded
        k.inputs = [padded, padded]
        k.params["prepadded"] = True
