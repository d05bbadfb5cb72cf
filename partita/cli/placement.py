"""``partita inspect``'s placement extras: each fallback's cost, the whole-system estimate,
what-if predictions and the HTML report (docs/placement.md)."""

from __future__ import annotations

import json

from partita.cli.progress import Progress


class InspectReport:
    """The placement report with the extras: prints and serialises them after it; everything
    else (rows, host, summary) is the placement report's."""

    def __init__(self, report, sections: list):
        self.report, self.sections = report, sections  # [(key, data, text)]

    def __getattr__(self, name):
        return getattr(self.report, name)

    def __str__(self):
        return "\n".join([str(self.report)] + [text.rstrip("\n") for _k, _d, text in self.sections])

    def to_dict(self) -> dict:
        data = self.report.to_dict()
        for key, value, _text in self.sections:
            data[key] = value
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def placement_extras(args, mod, partitioned, report, progress: Progress):
    """Fill in the fallback costs and add the sections the options ask for."""
    from partita.partition.estimate import estimate, fallback_costs, host_model_of

    with progress.step("estimate"):
        host = host_model_of(getattr(args, "host_model", None), args.target)
        report = fallback_costs(partitioned, report, host)
        est = estimate(partitioned, args.target, host)
    if getattr(args, "measure", False):
        _measure(args, mod, est, progress)
    sections = []
    if getattr(args, "estimate", False) or getattr(args, "html", None):
        sections.append(("estimate", est.to_dict(), est.table()))
    what_ifs = []
    for change in getattr(args, "what_if", None) or []:
        from partita.partition.whatif import what_if

        with progress.step(f"what if {change}"):
            w = what_if(
                mod,
                args.target,
                [change],
                host,
                placement=getattr(args, "placement", "all"),
                cpu_nodes=args.cpu_node,
                cpu_ops=args.cpu_op,
                min_region_size=args.min_region_size,
            )
        what_ifs.append(w)
    if what_ifs:
        text = "".join(w.table() for w in what_ifs)
        sections.append(("what_if", [w.to_dict() for w in what_ifs], text))
    if getattr(args, "html", None):
        from partita.cli.html import write_html

        write_html(args.html, args.model, args.target, partitioned, report, est)
        progress.note(f"wrote {args.html} (HTML report)")
    return InspectReport(report, sections) if sections else report


def _measure(args, mod, est, progress: Progress) -> None:
    import numpy as np

    from partita import build

    with progress.step("build and run (measured column)"):
        config = {
            "min_region_size": args.min_region_size,
            "cpu_ops": args.cpu_op,
            "cpu_nodes": args.cpu_node,
            "placement": getattr(args, "placement", "all"),
        }
        if getattr(args, "host_model", None):
            config["host_model"] = args.host_model
        exe = build(mod, args.target, config=config)
        rng = np.random.default_rng(0)
        inputs = []
        for port in exe.inputs:
            t = port.type
            if np.dtype(t.dtype).kind in "iu":
                info = np.iinfo(t.dtype)
                inputs.append(rng.integers(info.min, info.max + 1, t.shape, dtype=t.dtype))
            else:
                inputs.append(rng.standard_normal(t.shape).astype(t.dtype))
        est.with_measured(exe, exe.profile(*inputs, repeat=3))
