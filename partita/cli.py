"""The ``partita`` command line, thin over the Python API (also ``python -m partita``).

    partita inspect MODEL --target "npu, llvm" [--json] [--min-region-size N]
                          [--cpu-op TYPE ...] [--cpu-node INDEX_OR_NAME ...] [--strict]

``inspect`` imports the model (by its extension), partitions it for the target and prints the
placement report and its summary. Exit status: 0, 1 when ``--strict`` finds ops left on the CPU,
2 for a usage error or a model or target partita cannot handle.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from .errors import PartitaError

# extension -> (module, function, what); frontends are imported only when a model needs them.
LOADERS = {
    ".tflite": ("partita.frontends.tflite", "from_tflite", "TFLite"),
    ".onnx": ("partita.frontends.onnx", "from_onnx", "ONNX"),
    ".pt2": ("partita.frontends.pytorch", "from_pytorch", "PyTorch (torch.export)"),
    ".relay": ("partita.text", "parse", "Relay text"),
}


def load_model(path):
    """Import a model file with the frontend its extension names."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in LOADERS:
        known = ", ".join(LOADERS)
        raise PartitaError(
            f"cannot tell the format of {str(path)!r} from its extension (partita reads {known})"
        )
    if not path.is_file():
        raise PartitaError(f"no such model file: {str(path)!r}")
    module_name, func_name, what = LOADERS[ext]
    if ext == ".relay":
        from .text import parse

        return parse(path.read_text())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise PartitaError(
                f"{what} models ({ext}) are not supported yet: this partita has no {what} frontend"
            ) from None
        raise PartitaError(
            f"the {what} frontend needs the {e.name!r} package (pip install {e.name})"
        ) from None
    loader = getattr(module, func_name, None)
    if loader is None:
        raise PartitaError(
            f"{what} models ({ext}) are not supported yet: {module_name} has no {func_name}()"
        )
    return loader(str(path))


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="partita", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"partita {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_inspect(commands)
    return parser


def _add_inspect(commands) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="partition a model and print where every op runs, and why",
        description="Import MODEL, partition it for TARGET and print the placement report.",
    )
    inspect.add_argument(
        "model",
        metavar="MODEL",
        help="a model file: .tflite, .onnx, .pt2 (as their frontends land), or .relay text",
    )
    inspect.add_argument(
        "--target",
        "-t",
        required=True,
        help='composite target, tvmc style: "npu -config=npu-256, llvm"',
    )
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument(
        "--min-region-size",
        type=int,
        default=1,
        metavar="N",
        help="regions of fewer source ops go back to the CPU (default 1)",
    )
    inspect.add_argument(
        "--cpu-op",
        action="append",
        default=[],
        metavar="TYPE",
        help="force an op type onto the CPU (CONV_2D, qnn.add, ...); repeatable",
    )
    inspect.add_argument(
        "--cpu-node",
        action="append",
        default=[],
        metavar="INDEX_OR_NAME",
        help="force a source op onto the CPU by index or name; repeatable",
    )
    inspect.add_argument(
        "--strict", action="store_true", help="exit with status 1 if any op is left on the CPU"
    )


def inspect_model(args, out) -> int:
    """``partita inspect``: the report on ``out``; returns the exit status."""
    from .partition import StrictPartitionError, partition_for, placement_report

    mod = load_model(args.model)
    try:
        partitioned = partition_for(
            mod,
            args.target,
            min_region_size=args.min_region_size,
            cpu_ops=args.cpu_op,
            cpu_nodes=args.cpu_node,
            strict=args.strict,
        )
        report, status = placement_report(partitioned), 0
    except StrictPartitionError as e:
        report, status = e.report, 1
    out.write(report.to_json() + "\n" if args.json else str(report) + "\n")
    if status:
        n = len(report.host_rows)
        sys.stderr.write(
            f"partita: strict mode: {n} source op{'s' * (n != 1)} left on the {report.host}\n"
        )
    return status


def main(argv=None) -> int:
    """Entry point of the ``partita`` console script."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "inspect":
            return inspect_model(args, sys.stdout)
    except PartitaError as e:
        sys.stderr.write(f"partita: error: {e}\n")
        return 2
    return 2
