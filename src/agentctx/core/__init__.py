"""The core: the store's rules, written once, importable with the standard library alone.

The hooks (synchronous, a few milliseconds) and the async library (:class:`agentctx.store.Store`)
both run the rules here. A rule that reads or writes the database is a *plan* (:mod:`.plan`): a
generator that yields SQL steps and decides from their results; :func:`.plan.run` executes it on a
sync connection and :func:`.plan.run_async` on an aiosqlite one. Beside the rules sits the base they
share with the library: :mod:`.clock`, :mod:`.home`, :mod:`.db` (the connection policy),
:mod:`.schema`, :mod:`.errors`, :mod:`.tokens` and :mod:`.project` (project identity). Nothing in
this package imports anything heavier than the SQLite driver, nor anything of agentctx outside it
(both checked by the import contracts in ``pyproject.toml``).
"""

#: True in a hook process, set by the entry point: the process ends with ``os._exit`` as soon as the
#: handler returns, so what only tidies up (closing a read connection: unmapping the file) is left
#: to the end of the process (:func:`agentctx.core.connect.release`).
ENDS_WITH_HANDLER = False
