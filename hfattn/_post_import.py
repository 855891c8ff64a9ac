"""Post-import hooks: run a callback right after a module has been imported, whoever imports it.

Standard library only. ``hfattn/__init__.py`` uses it to register the hfattn model types with
the ``transformers`` Auto classes at the moment ``transformers`` gets imported, instead of
importing ``transformers`` (and torch, seconds) itself; see that module's docstring. The
mechanism is the one of PEP 369 and ``wrapt.register_post_import_hook``: a
:data:`sys.meta_path` finder that finds nothing itself. For a watched module it returns the
spec that the rest of ``sys.meta_path`` finds, with the loader wrapped so that the callback
runs once the module's code has executed. The module object, its ``__spec__.loader`` and
``__loader__`` are those of a normal import; other modules are not touched.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Iterable
from types import ModuleType


class PostImportHook(importlib.abc.MetaPathFinder):
    """Calls ``callback(name)`` after each watched module ``name`` has been imported (executed
    without error), for as long as the hook is installed.

    A callback that raises makes that import fail, as an error in the module itself would.
    """

    def __init__(self, names: Iterable[str], callback: Callable[[str], None]) -> None:
        self.names = frozenset(names)
        self.callback = callback
        self.executing: set[str] = set()
        """Watched modules whose code is running now (imported, not finished)."""

    def install(self) -> None:
        """Put the hook first on :data:`sys.meta_path` (once)."""
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        """Take the hook off :data:`sys.meta_path`; imports already under way still notify."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path=None, target=None):
        """The spec the other finders return for a watched module, with a notifying loader;
        ``None`` (not found here) for every other module."""
        if fullname not in self.names:
            return None
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader, self)
        return spec


class _NotifyingLoader:
    """Wraps a module's real loader: delegates everything to it, then notifies the hook."""

    def __init__(self, loader, hook: PostImportHook) -> None:
        self.loader = loader
        self.hook = hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module's code sees the real loader (importlib.resources, inspect, ... use it).
        module.__loader__ = module.__spec__.loader = self.loader
        name = module.__spec__.name
        self.hook.executing.add(name)
        try:
            self.loader.exec_module(module)
        finally:
            self.hook.executing.discard(name)
        self.hook.callback(name)

    def __getattr__(self, name: str):
        # is_package, get_filename, get_resource_reader, ... for callers of importlib.util.find_spec
        return getattr(self.loader, name)


__all__ = ["PostImportHook"]
