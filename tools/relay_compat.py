"""Count TVM v0.16's own Relay tests that pass through partita.relay (issue 27).

    python tools/relay_compat.py /work/relaycompat-run [--shim /work/shared/relay-compat]

The folder holds TVM v0.16.0's five test files, byte for byte (tests/python/relay/ of
apache/tvm; they are TVM's code, never commit them), and the shim's ``tvm/`` package beside them
(copied there from ``--shim`` when missing, with a conftest.py that puts the folder first on
sys.path). pytest runs once per file (a file that fails to import would stop a single run), with
this repository first on PYTHONPATH, and the tests that need TVM's runtime/codegen or its ADTs
deselected: EXCLUDED below lists each with its reason. Prints pass counts per file and in all.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FILES = (
    "test_dataflow_pattern.py",
    "test_pass_merge_composite.py",
    "test_pass_annotate_target.py",
    "test_pass_merge_compiler_regions.py",
    "test_pass_partition_graph.py",
)

_RUNTIME = "runtime"
_ADT = "ADT"
_CHECK = "runtime: check_result (TVM's C codegen, VM, graph executor)"
# file -> {test: reason} it is not counted: it needs what partita has no equivalent for
EXCLUDED = {
    "test_dataflow_pattern.py": {
        "test_match_const": f"{_RUNTIME}: binds a tvm.nd.array (TVM's NDArray)",
        "test_match_call_attr": f"{_RUNTIME}: tvm.ir.make_node (node reflection)",
        "test_no_match_call_attr": f"{_RUNTIME}: tvm.ir.make_node (node reflection)",
        "test_match_match": f"{_ADT}: the Prelude's tensor_concatenate (ADTs, Match)",
    },
    "test_pass_annotate_target.py": {
        "test_extern_dnnl": f"{_RUNTIME}: builds and runs with TVM's DNNL codegen",
        "test_extern_dnnl_mobilenet": f"{_RUNTIME}: relay.testing.mobilenet and TVM's DNNL codegen",
    },
    "test_pass_partition_graph.py": {
        "test_multi_node_compiler": f"{_RUNTIME}: TVM's C codegen, VM and graph executor",
        "test_extern_ccompiler_single_op": _CHECK,
        "test_extern_ccompiler_default_ops": _CHECK,
        "test_extern_ccompiler_multiple_functions": _CHECK,
        "test_extern_ccompiler": _CHECK,
        "test_extern_dnnl": f"{_RUNTIME}: TVM's DNNL codegen and graph executor",
        "test_extern_dnnl_mobilenet": f"{_RUNTIME}: relay.testing.mobilenet and TVM's DNNL codegen",
        "test_constant_propagation": f"{_RUNTIME}: binds a tvm.nd.array and runs check_result",
        "test_dnnl_fuse": f"{_RUNTIME}: create_workload, TVM's DNNL codegen",
        "test_tuple_output_exec": _CHECK,
        "test_extern_opt": f"{_RUNTIME}: binds tvm.nd.array values",
        "test_not_bind_constant": f"{_RUNTIME}: create_workload, TVM's DNNL table",
        "test_preserve_type_import": f"{_ADT}: partitions the Prelude's static tensor array ops",
    },
}

_SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped|deselected)\b")


def prepare(folder: str, shim: str) -> None:
    """Copy the shim's tvm/ and write the conftest.py into ``folder`` if they are missing."""
    missing = [f for f in FILES if not os.path.exists(os.path.join(folder, f))]
    if missing:
        sys.exit(f"{folder} lacks {', '.join(missing)} (TVM v0.16.0 tests/python/relay/)")
    if not os.path.isdir(os.path.join(folder, "tvm")):
        shutil.copytree(os.path.join(shim, "tvm"), os.path.join(folder, "tvm"))
    conftest = os.path.join(folder, "conftest.py")
    if not os.path.exists(conftest):
        with open(conftest, "w") as f:
            f.write("import os, sys\n\nsys.path.insert(0, os.path.dirname(__file__))\n")


def run_file(folder: str, name: str, verbose: bool) -> dict:
    """pytest on one file with its exclusions deselected: counts by outcome."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    # --deselect matches node id prefixes (test_match_call_attr would take ..._attr_dtype), so
    # collect first and name every counted test exactly
    listing = subprocess.run(
        [*pytest, "--co", name], cwd=folder, env=env, capture_output=True, text=True
    ).stdout.splitlines()
    ids = [i for i in listing if i.startswith(name + "::")]
    keep = [i for i in ids if i.split("::")[1].split("[")[0] not in EXCLUDED.get(name, {})]
    proc = subprocess.run(
        [*pytest, "-rf", *(keep or [name])], cwd=folder, env=env, capture_output=True, text=True
    )
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    counts = {k: 0 for k in ("passed", "failed", "error", "skipped")}
    counts["deselected"] = len(ids) - len(keep)
    for n, what in _SUMMARY.findall(tail):
        counts["error" if what.startswith("error") else what] += int(n)
    if verbose:
        for line in proc.stdout.splitlines():
            if line.startswith(("FAILED", "ERROR")):
                print("   ", line)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="folder holding TVM v0.16.0's five test files")
    ap.add_argument("--shim", default="/work/shared/relay-compat", help="the shim's folder")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the failing tests")
    args = ap.parse_args(argv)
    folder = os.path.abspath(args.folder)
    prepare(folder, args.shim)
    total_pass = total = 0
    print(f"{'file':40s} {'pass':>5s} {'counted':>8s} {'excluded':>9s}")
    for name in FILES:
        c = run_file(folder, name, args.verbose)
        counted = c["passed"] + c["failed"] + c["skipped"] + c["error"]
        note = "  (the file does not import)" if not c["passed"] + c["failed"] else ""
        print(f"{name:40s} {c['passed']:5d} {counted:8d} {c['deselected']:9d}{note}")
        total_pass, total = total_pass + c["passed"], total + counted
    print(f"{'all five':40s} {total_pass:5d} {total:8d} {sum(map(len, EXCLUDED.values())):9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
