"""partita's main job until the backends land: parse a small QNN graph written in Relay's text
format, infer its types, run it on the reference interpreter and check it against numpy."""

from __future__ import annotations

import numpy as np

import partita

PROGRAM = """
def @main(%x: Tensor[(1, 8, 8, 4), int8]) -> Tensor[(1, 8, 8, 4), int8] {
  %0 = qnn.dequantize(%x, 0.05f, -3);
  %1 = nn.relu(%0);
  %2 = add(%1, %1);
  qnn.quantize(%2, 0.1f, 2, out_dtype="int8")
}
"""


def main() -> int:
    mod = partita.InferType()(partita.parse(PROGRAM))
    print(mod)
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    (out,) = partita.interpret(mod, {"x": x})
    # The same computation in float64 numpy, rounding half away from zero as TFLite does.
    ref = np.maximum((x.astype(np.float64) + 3) * np.float32(0.05), 0) * 2 / np.float32(0.1)
    ref = np.clip(np.floor(ref + 0.5) + 2, -128, 127).astype(np.int8)
    print(f"output {out.shape} {out.dtype}; first row: {out[0, 0, :, 0].tolist()}")
    print("matches numpy:", np.array_equal(out, ref))
    return 0 if np.array_equal(out, ref) else 1


if __name__ == "__main__":
    raise SystemExit(main())
