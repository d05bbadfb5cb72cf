"""``partita info``: a model's inputs and outputs with their shape, dtype, scale and zero point,
so that a user can make the right ``--input`` file (``real = scale * (q - zero_point)``).

The quantization of a port is read from the graph (partita/runtime/ports.py): the scale and
zero point of the first quantized op that reads an input, and of the quantized op that produces
an output. A saved executable carries what its build read.
"""

from __future__ import annotations


def _row(name, ty, quant) -> dict:
    row = {"name": name, "shape": list(ty.shape), "dtype": str(ty.dtype)}
    if quant is not None:
        row["scale"], row["zero_point"] = quant
    return row


def model_ports(mod) -> dict:
    """``{"inputs": [...], "outputs": [...]}`` of an imported module's ``main``."""
    from partita.ir import Tuple
    from partita.passes import InferType
    from partita.runtime.ports import quantization

    mod = InferType()(mod)
    main = mod["main"]
    qin, qout = quantization(main)
    inputs = [_row(p.name_hint, p.checked_type, q) for p, q in zip(main.params, qin)]
    body = main.body
    fields = list(body.fields) if isinstance(body, Tuple) else [body]
    names = list(mod.attrs.get("output_names") or ())
    outputs = [
        _row(names[i] if i < len(names) else f"output_{i}", f.checked_type, q)
        for i, (f, q) in enumerate(zip(fields, qout))
    ]
    return {"inputs": inputs, "outputs": outputs}


def executable_ports(exe) -> dict:
    """The ports of a saved executable, with the quantization it recorded when it was built."""
    return {
        "inputs": [_row(p.name, p.type, p.quant) for p in exe.inputs],
        "outputs": [_row(p.name, p.type, p.quant) for p in exe.outputs],
    }


def render(info: dict) -> str:
    lines = []
    for kind in ("inputs", "outputs"):
        lines.append(f"{kind}:")
        for r in info[kind]:
            quant = (f"  scale {r['scale']:.6g} zero point {r['zero_point']}"
                     if isinstance(r.get("scale"), float) else
                     f"  scale {r['scale']} zero point {r['zero_point']}" if "scale" in r else
                     "")
            lines.append(f"  {r['name']}: {tuple(r['shape'])} {r['dtype']}{quant}")
    if info.get("note"):
        lines.append(info["note"])
    return "\n".join(lines)
