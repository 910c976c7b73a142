"""The SQLite driver: sqlean.py's C module, loaded without the package's Python layer.

``import sqlean`` runs ``sqlean.dbapi2``, which imports ``datetime`` and ``collections`` to register
date adapters agentctx never uses (it stores times as text): a few milliseconds on every hook. The
C module (``sqlean._sqlite3``) is the whole driver: ``connect``, ``Row``, the exceptions. This module
loads it straight from the installed package's folder, under its own name, so a later ``import
sqlean`` (the library, aiosqlite) finds it in ``sys.modules`` and both share one set of classes:
``sqlite.OperationalError is sqlean.OperationalError``. When the file cannot be found (an unusual
install), it falls back to ``import sqlean``.

Use ``from agentctx.core.driver import sqlite`` and ``sqlite.connect``, ``sqlite.Row``,
``sqlite.OperationalError``; mypy sees the ``sqlean`` package's types.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    import sqlean as sqlite

__all__ = ["sqlite"]

NAME = "sqlean._sqlite3"


def _load() -> ModuleType:
    """The driver's C module: already imported, else loaded from sqlean's folder, else the package."""
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    try:
        # the import system's own modules, loaded at start-up (importlib.machinery would add
        # importlib and warnings)
        import _frozen_importlib
        import _frozen_importlib_external
        import _imp

        ExtensionFileLoader = _frozen_importlib_external.ExtensionFileLoader
        ModuleSpec = _frozen_importlib.ModuleSpec
        for entry in sys.path:
            folder = os.path.join(entry or ".", "sqlean")
            if not os.path.isfile(os.path.join(folder, "__init__.py")):
                continue
            for suffix in _imp.extension_suffixes():
                path = os.path.join(folder, "_sqlite3" + suffix)
                if os.path.isfile(path):
                    loader = ExtensionFileLoader(NAME, path)
                    spec = ModuleSpec(NAME, loader, origin=path)
                    module = _imp.create_dynamic(spec)
                    sys.modules[NAME] = module
                    _imp.exec_dynamic(module)
                    return module
            break  # the first sqlean on the path is the one `import sqlean` would take
    except Exception:
        sys.modules.pop(NAME, None)
    import sqlean

    package: ModuleType = sqlean
    return package


if not TYPE_CHECKING:
    sqlite = _load()
