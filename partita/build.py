"""``partita.build``: partition for a composite target, compile every region, schedule them.

    exe = partita.build(mod, "npu, llvm")       # accelerator partitions + native host code
    exe = partita.build(mod, "npu, ref")        # the host part on the reference interpreter

The steps, each reported to ``progress`` (a callable taking a message) and logged: bind params,
partition (the composite target's pipeline), plan the static schedule, compile each accelerator
partition with its backend and each host segment with the host backend.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from partita.backends.compiled import flat_types
from partita.backends.registry import get_backend
from partita.errors import PartitaError
from partita.ir import Constant, Function, IRModule, substitute
from partita.partition import parse_target, partition_for, placement_report
from partita.passes.infer_type import infer_type
from partita.runtime.executable import Executable, Port, Step
from partita.runtime.ports import quantization
from partita.runtime.schedule import plan_schedule, release_points

log = logging.getLogger("partita.build")

# config keys passed through to partition_for
PARTITION_OPTIONS = (
    "min_region_size",
    "cpu_ops",
    "cpu_nodes",
    "strict",
    "placement",
    "host_model",
    "npu_nodes",
)


class BuildError(PartitaError):
    """A module, target or option ``build`` cannot use."""


def bind_params(mod: IRModule, params: dict | None) -> IRModule:
    """Replace ``main``'s parameters named in ``params`` by constants (TVM's ``params``)."""
    if not params:
        return mod
    main = mod["main"]
    names = {p.name_hint: p for p in main.params}
    unknown = [k for k in params if k not in names]
    if unknown:
        raise BuildError(
            f"params names {unknown[0]!r}, which is not an input of main "
            f"(inputs: {', '.join(names)})"
        )
    mapping = {names[k]: Constant(v) for k, v in params.items()}
    body = substitute(main.body, mapping)
    kept = [p for p in main.params if p.name_hint not in params]
    fn = Function(kept, body, main.ret_type, main.attrs, main.span)
    out = mod.with_function("main", fn)
    infer_type(out["main"], out)
    return out


def build(
    mod: IRModule,
    target="npu, llvm",
    params: dict | None = None,
    config: dict | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    placement: str | None = None,
) -> Executable:
    """Partition ``mod`` for ``target``, compile its regions and return an Executable.

    ``config`` takes partition_for's options (``min_region_size``, ``cpu_ops``, ``cpu_nodes``,
    ``strict``, ``placement``, ``host_model``, ``npu_nodes``); backend options go in the target
    string (``"npu -config=u55-256, llvm"``). ``placement="cost"`` is
    ``config={"placement": "cost"}`` (docs/placement.md).
    """
    if not isinstance(mod, IRModule):
        raise BuildError(f"build takes an IRModule, got {type(mod).__name__}")
    config = dict(config or {})
    if placement is not None:
        config["placement"] = placement
    unknown = [k for k in config if k not in PARTITION_OPTIONS]
    if unknown:
        raise BuildError(
            f"unknown build config key {unknown[0]!r} (known: {', '.join(PARTITION_OPTIONS)})"
        )
    say = progress or (lambda message: None)
    composite = parse_target(target)
    options = {spec.name: spec.options for spec in (*composite.targets, composite.host)}
    host = composite.host.name
    if not get_backend(host).can_compile:
        raise BuildError(
            f"the host backend {host!r} cannot compile yet; build for "
            f"{', '.join([*composite.names, 'ref'])!r} to run the host part on the reference "
            f"interpreter"
        )

    mod = bind_params(mod, params)
    say("partition")
    start = time.perf_counter()
    partitioned = partition_for(mod, composite, **config)  # parsed once, above
    report = placement_report(partitioned)
    plan = plan_schedule(partitioned, host)
    log.info("partitioned in %.3f s: %s", time.perf_counter() - start, report.summary_line())

    compiled: dict[str, object] = {}
    steps = []
    for step, release in zip(plan.steps, release_points(plan)):
        if step.symbol not in compiled:
            say(f"compile {step.symbol} ({step.target})")
            start = time.perf_counter()
            backend = get_backend(step.target)
            compiled[step.symbol] = backend.compile(step.function, options.get(step.target))
            log.info(
                "compiled %s with %s in %.3f s",
                step.symbol,
                step.target,
                time.perf_counter() - start,
            )
        steps.append(
            Step(
                step.target,
                step.symbol,
                compiled[step.symbol],
                tuple(step.inputs),
                tuple(step.outputs),
                tuple(release),
                step.host,
                (step.function, dict(options.get(step.target) or {})),
            )
        )
    main = partitioned["main"]
    qin, qout = quantization(mod["main"])  # what an input file must hold (partita info)
    qin = qin if len(qin) == len(main.params) else [None] * len(main.params)
    inputs = [
        Port(p.name_hint, p.checked_type, s, q)
        for p, s, q in zip(main.params, plan.input_slots, qin)
    ]
    out_types = flat_types(main.body.checked_type)
    names = list(mod.attrs.get("output_names") or ())
    if len(names) != len(out_types):
        names = [f"output_{i}" for i in range(len(out_types))]
    qout = qout if len(qout) == len(out_types) else [None] * len(out_types)
    outputs = [Port(n, t, s, q) for n, t, s, q in zip(names, out_types, plan.output_slots, qout)]
    return Executable(steps, plan.n_slots, inputs, outputs, plan.constants, str(composite), report)
