"""The argument parser of the ``partita`` command: every command with its --help and examples."""

from __future__ import annotations

import argparse

from partita.cli.errors import STATUS_HELP, UsageError


class CommandLineError(UsageError):
    """An argument argparse refused; ``usage`` is the (sub)command's usage line."""

    def __init__(self, message: str, usage: str, prog: str):
        super().__init__(message)
        self.usage, self.prog = usage, prog


class Parser(argparse.ArgumentParser):
    """argparse, with errors raised (so that ``--json`` can report them as JSON) and unknown
    arguments reported against the subcommand's usage rather than the top level's."""

    commands: dict = {}

    def error(self, message):
        raise CommandLineError(message, self.format_usage(), self.prog)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = self.commands.get(getattr(parsed, "command", None), self)
            sub.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value

    parse.__name__ = what
    return parse


positive = _int_at_least(1, "a positive whole number")
non_negative = _int_at_least(0, "zero or a positive whole number")

TARGET_HELP = (
    "composite target, tvmc style: accelerators in priority order, then the host; e.g. "
    '"npu, llvm", "npu -config=u55-256, ref" (see: partita backends)'
)

EXAMPLES = {
    "compile": """examples:
  partita compile model.tflite --target "npu, llvm" -o model.partita
  partita compile model.onnx -t "npu -config=u65-256, llvm" --input-shape input=1,3,224,224
  partita compile model.pt -t "npu, ref" --input-shape x=1,3,96,96 -v""",
    "run": """examples:
  partita run model.partita --input input=image.npy -o outputs.npz
  partita run model.partita --random --seed 1
  partita run model.tflite --target "npu, ref" --random      (compiles in memory first)""",
    "inspect": """examples:
  partita inspect model.tflite --target "npu, llvm"
  partita inspect model.tflite -t "npu, llvm" --json > placement.json
  partita inspect model.onnx -t "npu, llvm" --svg partitions.svg
  partita inspect model.tflite -t npu --cpu-op MEAN --cpu-node 12 --strict
  partita inspect model.partita                      (the report saved in an executable)""",
    "profile": """examples:
  partita profile model.partita
  partita profile model.partita --input input=image.npy --repeat 20 --json
  partita profile model.tflite --target "npu, llvm\"""",
    "demo": """examples:
  partita demo                          (compile for "npu, llvm", run the held-out digits)
  partita demo --target "npu, ref" --limit 50""",
    "sweep": """examples:
  partita sweep m1.tflite m2.tflite \\
      --target "npu -config={u55-128,u55-256,u65-256} -sram={256k,512k,1m}, llvm"
  partita sweep m.tflite -t "npu -config={u55-128,u65-512}, llvm" --csv --plot pareto.svg
  partita sweep m.tflite -t "..." --engine ray --out runs/ --resume""",
    "eval": """examples:
  partita eval "$DIGITS" --data digits --target "npu, llvm"
      (DIGITS: the model 'partita demo' runs, installed as partita/data/digits_mobilenetv2.tflite;
       DIGITS=$(python -c "import partita, os; print(os.path.join(os.path.dirname(
       partita.__file__), 'data', 'digits_mobilenetv2.tflite'))"))
  partita eval model.tflite --data val.npz -t "npu, llvm" --limit 500 --engine ray://head:10001""",
    "info": """examples:
  partita info model.tflite              (inputs and outputs: shape, dtype, scale, zero point)
  partita info model.partita --json""",
    "backends": """examples:
  partita backends
  partita backends --json""",
}


def _command(commands, name: str, help: str, description: str) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name,
        help=help,
        description=description,
        epilog=EXAMPLES[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show each step and the pass pipeline with timings",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the result (and errors) as JSON on stdout"
    )
    return parser


def _model_options(parser, model_help: str, target_required: bool = False) -> None:
    parser.add_argument("model", metavar="MODEL", help=model_help)
    parser.add_argument("--target", "-t", required=target_required, help=TARGET_HELP)
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="static shape of an input with dynamic dimensions (TorchScript .pt needs one per "
        "input); repeatable",
    )
    parser.add_argument(
        "--semantics",
        choices=("tflite", "tflite_builtin"),
        help="TFLite: match the reference kernels (default) or the optimized ones",
    )
    parser.add_argument(
        "--match",
        metavar="MODE",
        help="ONNX: ort (default) or ort_disable_all; PyTorch: qnn (default) or pytorch_eager",
    )
    parser.add_argument(
        "--ort-cpu",
        choices=("vnni", "avx2"),
        help="ONNX: reproduce ONNX Runtime's int8 kernels of a CPU with VNNI (exact sums, as the "
        "NPU) or of an AVX2 one without (int16 pair saturation); default: this machine's",
    )
    parser.add_argument(
        "--min-region-size",
        type=positive,
        default=1,
        metavar="N",
        help="regions of fewer source ops go back to the CPU (default 1)",
    )
    parser.add_argument(
        "--cpu-op",
        action="append",
        default=[],
        metavar="TYPE",
        help="force an op type onto the CPU (CONV_2D, qnn.add, ...); repeatable",
    )
    parser.add_argument(
        "--cpu-node",
        action="append",
        default=[],
        metavar="INDEX_OR_NAME",
        help="force a source op onto the CPU by index or name; repeatable",
    )
    parser.add_argument(
        "--strict", action="store_true", help="fail (exit status 1) if any op is left on the CPU"
    )
    parser.add_argument(
        "--placement",
        choices=("all", "cost"),
        default="all",
        help="all: everything the accelerator supports (default); cost: partitions the host "
        "runs faster, transfers included, go back to it (docs/placement.md)",
    )
    parser.add_argument(
        "--host-model",
        metavar="HOST",
        help="the host the estimates assume: cortex-a55, cortex-a55:1.8GHz, "
        "generic:2GHz:8 (clock, int8 MACs/cycle); default: this machine's measured LLVM kernels",
    )


def _trust_option(parser) -> None:
    parser.add_argument(
        "--trust",
        action="store_true",
        help="a saved executable: run the object code it carries even if it was not written on "
        "this machine (default: such host regions are compiled again from the IR in the file)",
    )


def _input_options(parser) -> None:
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input array (.npy); repeatable",
    )
    parser.add_argument(
        "--random",
        action="store_true",
        help="random inputs of the right shapes and dtypes (seeded)",
    )
    parser.add_argument(
        "--seed", type=non_negative, default=0, help="seed for --random (default 0)"
    )


def _engine_options(parser) -> None:
    parser.add_argument(
        "--engine",
        default="local",
        metavar="ENGINE",
        help="local (default: a process pool on every core), local:N, ray (a "
        "local Ray instance) or ray://HOST:PORT (a cluster)",
    )
    parser.add_argument(
        "--workers", type=positive, metavar="N", help="worker processes (local)"
    )
    parser.add_argument(
        "--retries",
        type=non_negative,
        default=1,
        metavar="N",
        help="retries of a failed task before it is reported (default 1)",
    )


def _add_scale(commands) -> None:
    p = _command(
        commands,
        "sweep",
        "compile and simulate models over a grid of NPU configs",
        "Compile every MODEL at every point of TARGET's grid (brace lists expand: "
        "-config={u55-128,u55-256}) and report NPU cycles, time at the clock, SRAM "
        "peak, bytes moved, ops and MACs on the NPU and CPU time per point.",
    )
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite, .onnx or .pt2 files")
    p.add_argument("--target", "-t", required=True, help=TARGET_HELP + "; {a,b} lists expand")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="cycles vs SRAM and MAC-array size with the Pareto front (matplotlib; .svg or .png)",
    )
    p.add_argument(
        "--out", metavar="DIR", help="append each record to DIR/sweep.jsonl as it arrives"
    )
    p.add_argument("--resume", action="store_true", help="skip points already in --out")
    _engine_options(p)

    p = _command(
        commands,
        "eval",
        "run a compiled model over a dataset and check it",
        "Compile MODEL for TARGET, run every sample of DATA and report accuracy (when "
        "labels are given), top-1 agreement and max |diff| against a reference (TFLite "
        "or ONNX Runtime when installed, else partita's interpreter) and throughput.",
    )
    p.add_argument("model", metavar="MODEL", help="a .tflite, .onnx or .pt2 model")
    p.add_argument(
        "--data",
        required=True,
        help="an .npz (inputs: images/inputs/x; labels: "
        "labels/y) or 'digits' (the test set shipped with partita)",
    )
    p.add_argument("--target", "-t", default="npu, llvm", help=TARGET_HELP)
    p.add_argument("--limit", type=positive, metavar="N", help="only the first N samples")
    p.add_argument(
        "--reference",
        choices=("auto", "interpreter", "tflite", "onnx"),
        default="auto",
        help="what to compare with (default auto)",
    )
    _engine_options(p)


def build_parser() -> argparse.ArgumentParser:
    from partita.version import __version__

    parser = Parser(
        prog="partita",
        description="Partition quantized neural networks between an NPU and a CPU, compile "
        "and run them.",
        epilog=STATUS_HELP,
    )
    parser.add_argument("--version", action="version", version=f"partita {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = _command(
        commands,
        "compile",
        "compile a model for a target and save the executable",
        "Import MODEL, partition it for TARGET, compile every region and save one "
        "executable file (docs/file-format.md).",
    )
    _model_options(
        p, "a model file: .tflite, .onnx, .pt2, .pt (TorchScript) or .relay", target_required=True
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the executable (default: MODEL's name with .partita)",
    )

    p = _command(
        commands,
        "run",
        "run a compiled executable (or a model, compiled in memory)",
        "Run MODEL once and print each output's shape, dtype and SHA-256 digest.",
    )
    _model_options(p, "a saved executable (.partita) or a model file (then give --target)")
    _input_options(p)
    _trust_option(p)
    p.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs by name")

    p = _command(
        commands,
        "inspect",
        "print where every op runs, and why",
        "Partition MODEL for TARGET and print the placement report: every source op, "
        "its target, composite and partition, and for ops left on the CPU the reason.",
    )
    _model_options(p, "a model file, or a saved executable (its report)")
    _trust_option(p)
    p.add_argument(
        "--svg",
        metavar="FILE",
        help="draw the partitioned graph as SVG (pure Python: no Graphviz needed)",
    )
    p.add_argument("--dot", metavar="FILE", help="write the partitioned graph as Graphviz DOT")
    p.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="CHANGE",
        help="predict the change in latency, SRAM and transfers without compiling: "
        "cpu-node=NAME, npu-node=NAME or preset=NAME; repeatable",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print the whole-system estimate (accelerator, host, transfers, SRAM, weights)",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="with --estimate: also build, run once on random inputs and fill the measured column",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write one offline HTML report: picture, placement table, estimate, reasons",
    )

    p = _command(
        commands,
        "profile",
        "profile one inference per step and per operation",
        "Run MODEL with profiling: time per step, per NPU operation (cycles, MACs, "
        "utilisation, bytes) and per CPU kernel, with totals.",
    )
    _model_options(p, "a saved executable (.partita) or a model file (then give --target)")
    _input_options(p)
    _trust_option(p)
    p.add_argument(
        "--repeat",
        type=positive,
        default=5,
        metavar="N",
        help="runs to take the median of (default 5)",
    )

    p = _command(
        commands,
        "demo",
        "the main job: compile the shipped digits MobileNetV2 and run it",
        "Compile the int8 MobileNetV2 that ships with partita (trained on scikit-learn's digits) "
        'for "npu, llvm", run the held-out digits and print placement, accuracy, NPU cycles, '
        "CPU time and whether every output equals TFLite's.",
    )
    p.add_argument("--target", "-t", help=TARGET_HELP + ' (default "npu, llvm")')
    p.add_argument(
        "--limit", type=positive, metavar="N", help="run only the first N test digits"
    )

    p = _command(
        commands,
        "info",
        "show a model's inputs and outputs: shape, dtype, scale, zero point",
        "Import MODEL (or load a saved executable) and list its inputs and outputs with "
        "shape and dtype, and for quantized ports the scale and zero point (real = scale * "
        "(q - zero_point)): what an --input .npy file must hold.",
    )
    p.add_argument("model", metavar="MODEL", help="a model file or a saved executable")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="static shape of an input with dynamic dimensions; repeatable")
    _trust_option(p)

    _add_scale(commands)

    from partita.cli.compare import add_parser as add_compare

    add_compare(commands)

    _command(
        commands,
        "backends",
        "list the backends, their options and where they come from",
        "List every backend partita can find: built in, registered, or declared by an "
        "installed package through the 'partita.backends' entry point group, with the NPU's "
        "presets and the -sram sizes it takes.",
    )
    parser.commands = dict(commands.choices)
    return parser
