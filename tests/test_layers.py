"""The package's structure: layers that import downward only (import-linter's contracts in
``pyproject.toml``), no import cycle, and no function-level import of hfattn's own modules
without a reason written next to it."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hfattn"
LAZY_BY_DESIGN = ("hfattn/cli.py", "hfattn/commands/")
"""Modules whose handlers import on use by design: ``hfattn --help`` imports every command
module, and must import neither torch nor transformers (``tests/cli/test_cli_startup.py``)."""
REASON = re.compile(r"#\s*\S")


def test_the_layer_contracts_hold():
    """``lint-imports`` in its own process: in this one it would reconfigure logging for the
    tests that follow (their ``caplog`` then captured nothing)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "imports downward only KEPT" in done.stdout
    assert "no import cycle between sibling modules or packages KEPT" in done.stdout


def _comments(source: str) -> dict[int, str]:
    """Line number → the comment on that line."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}


def function_level_self_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, import text)`` of each import of an hfattn module inside a function of
    ``path`` with no comment (the reason) on its first line or the line above."""
    source = path.read_text(encoding="utf-8")
    comments = _comments(source)
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom):
                own = node.level > 0 or (node.module or "").split(".")[0] == "hfattn"
            elif isinstance(node, ast.Import):
                own = any(alias.name.split(".")[0] == "hfattn" for alias in node.names)
            else:
                continue
            if own and not (
                REASON.search(comments.get(node.lineno, ""))
                or REASON.search(comments.get(node.lineno - 1, ""))
            ):
                found.append((node.lineno, ast.get_source_segment(source, node)))
    return found


def test_function_level_imports_of_hfattn_say_why():
    unexplained = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(LAZY_BY_DESIGN):
            continue
        found = function_level_self_imports(path)
        if found:
            unexplained[relative] = found
    assert not unexplained, (
        "function-level imports of hfattn modules need a reason in a comment (a measured "
        f"start-up cost), or belong at the top of the module: {unexplained}"
    )


def test_the_checker_finds_an_unexplained_import(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "def f():\n"
        "    from .schema import require\n"
        "    from .run_folder import x  # torch: 2 s, only this path needs it\n"
        "    import json\n"
    )
    assert function_level_self_imports(module) == [(2, "from .schema import require")]


def imports_of_test_modules(path: Path) -> list[str]:
    """The ``tests.<...>.test_*`` modules that the file at ``path`` imports (at any level)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if re.fullmatch(r"tests(\.\w+)*\.test_\w+", name)]


def test_test_modules_share_code_through_helpers_only():
    """Code that several test files use lives in ``tests/helpers/`` or a ``conftest.py``
    (as ``transformers.testing_utils``): a test module that imports another runs that one's
    imports and fixtures and ties their edits together."""
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    found = {
        str(path.relative_to(ROOT)): imported
        for path in files
        if (imported := imports_of_test_modules(path))
    }
    assert found == {}


def test_the_test_module_check_finds_an_import(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text("import os\nfrom tests.cli.test_cli_startup import HEAVY\n")
    assert imports_of_test_modules(path) == ["tests.cli.test_cli_startup"]
