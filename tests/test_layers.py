"""Every arrow points down: no module imports from a layer above its own
(docs/architecture.md, The layers).

The order below is the one place the layer order lives. Every import of every module under
src/cantata is read from its syntax tree, at any depth (inside functions and
``TYPE_CHECKING`` blocks too), and so is an `importlib.import_module` call whose module
name is written out (``"cantata.serve.app"``, ``f"cantata.stores.{name}"``): a lazy import
of an upper layer is still an arrow up. Circles are counted over the same imports: one
written inside a function or under ``TYPE_CHECKING`` still ties two modules together for a
reader, so it is broken by moving the shared type below both, not by hiding the import.
The `cantata` package itself sits over every layer (it exports names from all of them); a
layer may read only its ``__version__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

LAYERS = (
    "core",
    "stores",
    "runtime",
    "models",
    "tools",
    "agents",
    "workflows",
    "teams",
    "declarative",
    "evals",
    "serve",
    "cli",
)
"""Lowest first: a module may import from its own layer and the ones before it."""

MAX_CIRCLE = 3
"""The most modules one circle of imports may hold, counting every import (inside
functions and under ``TYPE_CHECKING`` too)."""

ROOT_NAMES_ANY_LAYER_MAY_READ = frozenset({"__version__"})

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "cantata"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, path: Path) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, imported module, names taken from it) for every import in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(a.name for a in node.names)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            named = _written_module_name(node.args[0])
            if named is not None:
                yield node.lineno, named, ()


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _written_module_name(arg: ast.expr) -> str | None:
    """The module an `import_module` call names, when its text starts with ``cantata.``."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        text = arg.value
    elif (
        isinstance(arg, ast.JoinedStr)
        and arg.values
        and isinstance(arg.values[0], ast.Constant)
        and isinstance(arg.values[0].value, str)
    ):
        text = arg.values[0].value
    else:
        return None
    return text.rstrip(".") if text.startswith("cantata.") else None


def _layer(module: str) -> str | None:
    """The layer of a module under cantata (None for the `cantata` package itself and the
    modules beside its ``__init__``, which sit over every layer)."""
    parts = module.split(".")
    if len(parts) < 2 or (len(parts) == 2 and (PACKAGE / f"{parts[1]}.py").exists()):
        return None
    return parts[1]


def upward_imports() -> list[str]:
    """Every import that points from a layer to one above it, as readable lines."""
    found = []
    for module, path in _modules().items():
        own = _layer(module)
        if own is None:
            continue
        for line, target, names in _imports(module, path):
            if target != "cantata" and not target.startswith("cantata."):
                continue
            where = f"{path.relative_to(SRC)}:{line}"
            other = _layer(target)
            if other is None:
                if _reads_root_exports(names):
                    found.append(f"{where}: {own} imports from the cantata package {names}")
                continue
            if other not in LAYERS:
                found.append(f"{where}: {other!r} is not a layer in tests/test_layers.py")
            elif LAYERS.index(other) > LAYERS.index(own):
                found.append(f"{where}: {own} imports {target} ({other}, a layer above)")
    return found


def _reads_root_exports(names: tuple[str, ...]) -> bool:
    """True when an import of the `cantata` package takes more than its version: the
    package re-exports names of every layer, so any other name is an arrow up."""
    return not names or bool(set(names) - ROOT_NAMES_ANY_LAYER_MAY_READ)


def import_circles(modules: dict[str, Path] | None = None) -> list[list[str]]:
    """Strongly connected components of the module import graph (every import counted)
    with more than one module; `modules` (name to file) defaults to all of src/cantata."""
    modules = _modules() if modules is None else modules
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target, names in _imports(module, path):
            for name in names or ("",):
                candidate = f"{target}.{name}" if name and f"{target}.{name}" in modules else target
                while candidate and candidate not in modules:
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != module:
                    edges[module].add(candidate)
    return [c for c in _components(edges) if len(c) > 1]


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def test_every_package_under_cantata_is_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(LAYERS)


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    found = upward_imports()
    assert not found, "imports that point up:\n" + "\n".join(found)


def test_no_import_circle_holds_more_than_three_modules() -> None:
    large = [c for c in import_circles() if len(c) > MAX_CIRCLE]
    assert not large, "import circles:\n" + "\n".join(f"{len(c)}: {c}" for c in large)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    from ..serve.mcp_server import as_mcp_server\n", "serve"),
        ("if TYPE_CHECKING:\n    from cantata.teams import Team\n", "teams"),
        ("import importlib\nimportlib.import_module('cantata.cli.app')\n", "cli"),
        ("import importlib\nimportlib.import_module(f'cantata.declarative.{x}')\n", "declarative"),
    ],
)
def test_the_check_sees_an_upward_import_wherever_it_is_written(
    source: str, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    targets = [t for _, t, _ in _imports("cantata.agents.probe", path)]
    assert [_layer(t) for t in targets if t.startswith("cantata")] == [expected]


def test_the_check_reads_a_name_of_the_cantata_package_as_an_arrow_up(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("from .. import ChatAgent, __version__\n")
    (_, target, names) = next(_imports("cantata.tools.probe", path))
    assert target == "cantata"
    assert _reads_root_exports(names)
    assert not _reads_root_exports(("__version__",))


def test_a_circle_counts_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    sources = {
        "a": "from .b import B\n",
        "b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
        "c": "def f():\n    from .d import D\n",
        "d": "from .a import A\n",
        "e": "from .a import A\n",
    }
    modules = {}
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source)
        modules[f"cantata.probe.{name}"] = tmp_path / f"{name}.py"
    assert import_circles(modules) == [[f"cantata.probe.{n}" for n in "abcd"]]
