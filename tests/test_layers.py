"""Who may import whom (docs/architecture.md): dependencies point down the layers, never up,
and frontends and partition never import each other. Every import counts, at module level or
inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "partita": "partita",
    "patterns": "partita.patterns",
    "partition": "partita.partition",
    "backends": "partita.backends",
    "frontends": "partita.frontends",
}
LAYERS = [  # (prefix, layer): the longest matching prefix decides
    ("partita.cli", 1),
    ("partita.build", 1),
    ("partita.runtime", 1),
    ("partita.scale", 1),
    ("partita.relay", 1),
    ("partita.__main__", 1),
    ("partita.frontends", 2),
    ("partita.partition", 2),
    ("partita.backends", 3),
    ("partita.patterns", 4),
    ("partita", 5),  # passes, interpreter: the top of the core
    ("partita.text", 6),
    ("partita.ops", 7),
    ("partita.ir", 8),
    ("partita.errors", 9),
    ("partita.limits", 9),
    ("partita.version", 9),
]
EXEMPT = {"partita"}  # partita/__init__.py only re-exports, core first and build last


def layer(module: str) -> int:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def modules():
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([package, *parts]), path, path.name == "__init__.py"


def imports(module: str, path: Path, is_package: bool, runtime_only: bool = False):
    """(imported module, line) for every import in the file; ``runtime_only`` leaves out the
    imports under ``if TYPE_CHECKING:`` (annotations only: they never run)."""
    tree = ast.parse(path.read_text())
    base = module.split(".") if is_package else module.split(".")[:-1]
    skipped = set()
    for node in ast.walk(tree) if runtime_only else ():
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(
                    base[: len(base) - node.level + 1] + ([node.module] if node.module else [])
                )
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full if _is_module(full) else target), node.lineno


def _is_module(name: str) -> bool:
    owners = [(f, p) for f, p in FOLDERS.items() if name == p or name.startswith(p + ".")]
    if not owners:
        return "." not in name
    folder, package = max(owners, key=lambda fp: len(fp[1]))  # partita.frontends before partita
    rest = name[len(package) :].lstrip(".").split(".") if name != package else []
    path = ROOT / folder / Path(*rest) if rest else ROOT / folder
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_no_upward_imports_and_frontends_and_partition_stay_apart():
    problems = []
    for module, path, is_package in modules():
        if module in EXEMPT:
            continue
        mine = layer(module)
        for target, line in imports(module, path, is_package):
            if not (target == "partita" or target.startswith("partita.")):
                continue
            theirs = layer(target)
            where = f"{path.relative_to(ROOT)}:{line} ({module} -> {target})"
            if theirs < mine and target != "partita":
                problems.append(f"upward import, layer {mine} -> {theirs}: {where}")
            if target == "partita" and mine > 1:
                problems.append(f"imports the top-level package (re-exports every layer): {where}")
            pair = {(module.split(".") + [""])[1], (target.split(".") + [""])[1]}
            if pair == {"frontends", "partition"}:
                problems.append(f"frontends and partition import each other: {where}")
    assert not problems, "\n".join(problems)


def test_relative_imports_stay_in_their_folder():
    """``from .x import`` only names a module beside the file on disk; anything further away is
    imported absolutely (``from partita.ir import``), so a reader and an IDE can follow it: the
    package-dir mapping puts patterns/, partition/, backends/ and frontends/ under ``partita``
    although they are not inside partita/ on disk."""
    problems = []
    for _module, path, _is_package in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            first = (node.module or "").split(".")[0]
            beside = not first or (path.parent / f"{first}.py").exists()
            if node.level > 1 or "." in (node.module or "") or not beside:
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not problems, "relative imports leaving their folder:\n" + "\n".join(problems)


def test_no_import_cycles():
    """No module imports itself back through others, at module level or inside a function (a
    loop hidden behind a function-level import is still a loop). A package's own ``__init__``
    re-exporting its modules does not count as an edge back from them."""
    import networkx as nx

    graph = nx.DiGraph()
    known = {name: (path, is_package) for name, path, is_package in modules()}
    for name, (path, is_package) in known.items():
        for target, _line in imports(name, path, is_package, runtime_only=True):
            if target in known and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    loops = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not loops, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in loops)


# ``from x import _name`` of another module's private name: each is a helper the two modules
# share without saying so. These predate the check (issue 25) and are outside the llvm backend;
# the list may only shrink (a fixed entry must leave it).
KNOWN_PRIVATE_IMPORTS = {
    "partita/runtime/artifact.py: partita.runtime.writer._sha",
    "partita/ops/qnn_elemwise.py: qnn._broadcast_param",
    "partita/ops/qnn_elemwise.py: qnn._channels",
    "partita/ops/qnn_elemwise.py: tensor_transform._concatenate_rel",
    "partita/ops/registry.py: partita.ir.op._REGISTRY",
    "patterns/partition.py: rewrite._rebuild_node",
    "patterns/matcher.py: pattern._PostCheck",
    "patterns/control.py: pattern._as_pattern",
    "patterns/group.py: pattern._PostCheck",
    "backends/llvm/lower/qtransformer.py: partita.ops.emulation.activation_kernels._exp_or_inf",
    "backends/llvm/lower/float_spatial.py: partita.ops.nn_image._linear_taps",
    *(f"frontends/qdq.py: qdq_parts.{n}" for n in (
        "_act", "_activation", "_attrs", "_call", "_dq", "_has_semantics", "_params", "_qtype",
        "_quantized", "_s", "_scalar", "_unary_ok")),
    "frontends/onnx/ops_dynquant.py: ops_quant._dense_weight",
    "frontends/onnx/ops_quant.py: ops_nn._pool_common",
}


def _private_imports() -> set[str]:
    found = set()
    for module, path, is_package in modules():
        base = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
                    continue
                if node.level:
                    owner = ".".join(base[: len(base) - node.level + 1]
                                     + ([node.module] if node.module else []))
                else:
                    owner = node.module or ""
                inside = module == owner or module.startswith(owner + ".")
                if _is_module(f"{owner}.{name}") and inside:
                    continue  # a private module of a package the importer is inside
                found.add(f"{path.relative_to(ROOT)}: {node.module}.{name}")
    return found


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: what another module needs is
    public (renamed, with a docstring) or stays where it is."""
    found = _private_imports()
    new = sorted(found - KNOWN_PRIVATE_IMPORTS)
    assert not new, "imports of another module's private names:\n" + "\n".join(new)
    fixed = sorted(KNOWN_PRIVATE_IMPORTS - found)
    assert not fixed, "no longer imported (remove from KNOWN_PRIVATE_IMPORTS):\n" + "\n".join(
        fixed)


BACKENDS = ("llvm", "npu", "ref")
PUBLIC_FACE = {"llvm": ("partita.backends.llvm", "partita.backends.llvm.public")}


def test_a_backend_reaches_a_sibling_only_through_its_public_face():
    """backends/npu uses the llvm backend's code generator through backends/llvm/public.py
    (or the package itself), never its inside, so the llvm backend's modules can move."""
    problems = []
    for module, path, is_package in modules():
        parts = module.split(".")
        if parts[:2] != ["partita", "backends"] or len(parts) < 3 or parts[2] not in BACKENDS:
            continue
        mine = parts[2]
        for target, line in imports(module, path, is_package):
            tparts = target.split(".")
            if tparts[:2] != ["partita", "backends"] or len(tparts) < 3:
                continue
            sibling = tparts[2]
            if sibling == mine or sibling not in BACKENDS:
                continue
            faces = PUBLIC_FACE.get(sibling, (f"partita.backends.{sibling}",))
            if target not in faces:
                problems.append(f"{path.relative_to(ROOT)}:{line} ({module} -> {target})")
    assert not problems, "a backend reaching into a sibling:\n" + "\n".join(problems)


def test_scale_never_imports_the_cli():
    """scale/ sits beside the CLI (layer 1), which drives it: it reaches models and the shipped
    data through the layers below (frontends.files.load_model_file, partita.shipped), never
    through partita.cli, at module level or inside a function."""
    problems = []
    for module, path, is_package in modules():
        if module.startswith("partita.scale"):
            for target, line in imports(module, path, is_package):
                if target == "partita.cli" or target.startswith("partita.cli."):
                    problems.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not problems, "\n".join(problems)
