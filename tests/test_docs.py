"""The README and the docs are code: every ```python block in them runs as written.

Each block is a complete program. The blocks of one page run one after another in one
fresh interpreter (so the page pays for its imports once), each in a scratch directory of
its own, as `python block.py` would run it (`runpy`, as ``__main__``), with a bounded wait
for the whole page. A block that needs the embedded model is marked by using
`LocalChatClient`; a page's such blocks run as a group of their own with the `local_model`
tests. A block that repeats another page's word for word runs once. Blocks fenced as
```py are shown, not run: the migration guide uses them for the other frameworks' code,
which is not installed here, and the how-to guides for lines that need a server or a
cluster of your own; ```sh blocks are commands.

The same pages, the docstrings and the benchmarks speak to users, so they are also read
for what means nothing to a reader: an internal work item by number ("issue 24"), a
"coming" for what already exists, a repository file that is not there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOCUMENTS = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

# Runs the blocks named in a JSON file, each as `python block.py` would, in one process.
_RUNNER = r"""
import json, os, runpy, sys, traceback
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
failed = []
for name, path in blocks:
    here = os.path.dirname(path)
    os.chdir(here)
    environ = dict(os.environ)
    print(f"--- {name}", flush=True)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            failed.append(name)
            print(f"{name}: exit {exc.code}", file=sys.stderr)
    except BaseException:
        failed.append(name)
        print(f"--- {name} failed:", file=sys.stderr)
        traceback.print_exc()
    finally:
        os.environ.clear()
        os.environ.update(environ)
        guard = sys.modules.get("cantata.models.guard")
        if guard is not None:  # a block that blocks real model calls blocks them for itself
            guard.set_model_requests_allowed(True)
    sys.stdout.flush()
    sys.stderr.flush()
if failed:
    print("failed: " + ", ".join(failed), file=sys.stderr)
    sys.exit(1)
"""


def _name(document: Path) -> str:
    return document.relative_to(ROOT).as_posix()


def _blocks() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for number, match in enumerate(_FENCE.finditer(text), start=1):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{_name(document)}:{line} (block {number})", match.group(1)))
    return found


def _needs_model(code: str) -> bool:
    return "LocalChatClient(" in code


def _pages() -> list[object]:
    """One test per page, and per kind of block on it (scripted, or on the embedded model)."""
    groups: dict[tuple[str, bool], list[tuple[str, str]]] = {}
    seen: set[str] = set()
    for name, code in _blocks():
        if code in seen:
            continue  # the same program on another page (the README's, say) runs once
        seen.add(code)
        page = name.split(":")[0]
        groups.setdefault((page, _needs_model(code)), []).append((name, code))
    params: list[object] = []
    for (page, local), blocks in groups.items():
        marks = [pytest.mark.local_model] if local else []
        ident = f"{page} (embedded model)" if local else page
        params.append(pytest.param(blocks, id=ident, marks=marks))
    return params


def test_the_documents_have_python_blocks() -> None:
    pages = {name.split(":")[0] for name, _ in _blocks()}
    assert {"README.md", "docs/migration.md", "docs/getting-started.md"} <= pages
    assert any(page.startswith("docs/concepts/") for page in pages)


@pytest.mark.parametrize("blocks", _pages())
def test_page_blocks_run_as_written(blocks: list[tuple[str, str]], tmp_path: Path) -> None:
    listed = []
    for number, (name, code) in enumerate(blocks, start=1):
        here = tmp_path / f"block{number}"
        here.mkdir()
        script = here / "block.py"
        script.write_text(code, encoding="utf-8")
        listed.append((name, str(script)))
    (tmp_path / "blocks.json").write_text(json.dumps(listed), encoding="utf-8")
    # A fresh reader's environment: not the Ray cluster another test joined (ray.init
    # leaves RAY_ADDRESS behind in this process), so a block that starts Ray starts its own.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(tmp_path / "blocks.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300 + 60 * len(blocks),
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"


# -- what a reader should not meet --------------------------------------------------------

# "coming" as a promise ("coming: X", "is coming"), not "coming from AutoGen"
_COMING = re.compile(r"\b(?:up)?coming\b(?!\s+from\b)", re.IGNORECASE)
# an internal work item by number: "issue 24", "issues 10 and 16", "(issue #26)"
_ISSUE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
# a path into the repository: the top-level folders and files a reader could open
_REPO_PATH = re.compile(
    r"(?<![\w./-])((?:docs|examples|benchmarks|tests|src|\.ci)/[\w.*/-]*[\w*]"
    r"|(?:README|DESIGN|CHANGELOG|CONTRIBUTING|RESULTS|Makefile|pyproject)\b(?:\.md|\.toml)?)"
)
# what the repository makes or keeps out of git: named on purpose, not shipped
_GENERATED = ("benchmarks/results/", "site/", "docs-artifacts/")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _texts() -> list[tuple[str, str]]:
    """Every file that speaks to users: the pages, the source (its docstrings), the
    benchmarks."""
    files = [*DOCUMENTS, *sorted((ROOT / "src").rglob("*.py"))]
    files += sorted(p for p in (ROOT / "benchmarks").rglob("*") if p.suffix in (".py", ".md"))
    return [(_name(p), p.read_text(encoding="utf-8")) for p in files]


def _lines(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for name, text in _texts():
        for number, line in enumerate(text.splitlines(), start=1):
            for match in pattern.finditer(line):
                found.append(f"{name}:{number}: {match.group(0)!r} in {line.strip()!r}")
    return found


def test_no_internal_issue_numbers() -> None:
    assert not _lines(_ISSUE), "\n".join(_lines(_ISSUE))


def test_no_coming_for_what_exists() -> None:
    assert not _lines(_COMING), "\n".join(_lines(_COMING))


def _missing(reference: str) -> bool:
    path = reference.rstrip(".")
    if any(path.startswith(prefix) for prefix in _GENERATED):
        return False
    if path in ("Makefile", "pyproject", "pyproject.toml", "README", "README.md"):
        path = {"pyproject": "pyproject.toml", "README": "README.md"}.get(path, path)
    elif "/" not in path and not path.endswith(".md"):
        return False  # a bare word ("Makefile's"), not a file name
    if "*" in path:
        return not any(ROOT.glob(path))
    return not (ROOT / path).exists()


def test_every_repository_file_named_exists() -> None:
    missing = []
    for name, text in _texts():
        for number, line in enumerate(text.splitlines(), start=1):
            for match in _REPO_PATH.finditer(line):
                if _missing(match.group(1)):
                    missing.append(f"{name}:{number}: {match.group(1)}")
    assert not missing, "files named but not in the repository:\n" + "\n".join(missing)


def test_every_relative_link_of_a_page_resolves() -> None:
    """mkdocs checks the links between the site's pages; the README is not one of them."""
    broken = []
    for document in DOCUMENTS:
        for target in _LINK.findall(document.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:|^#", target):
                continue  # a URL, or an anchor on the same page
            path = (document.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{_name(document)}: {target}")
    assert not broken, "\n".join(broken)
