"""The cli's modules import each other one way: no circle at any depth (imports inside
functions count), so a reader goes from `app` down to the leaves and never back."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "cantata" / "cli"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cantata.cli."):
            found.add((node.module or "").split(".")[2])
    return found


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in CLI.glob("*.py")}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def test_no_module_of_the_cli_imports_itself_back() -> None:
    graph = _graph()
    assert graph["app"] >= {"run", "serve"}  # the graph is read: app registers both

    def reaches(start: str, target: str) -> bool:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name == target:
                return True
            if name not in seen:
                seen.add(name)
                todo.extend(graph[name])
        return False

    circles = sorted(name for name in graph if reaches(name, name))
    assert circles == [], f"modules in an import circle: {circles}"
