"""Retrieval for the library: hybrid ranking for ``ctx_search`` (:mod:`.hybrid`) and the SessionStart
digest's builder (:mod:`.digest`). Keyword search and relevance, which the hooks run too, are
:mod:`agentctx.core.search`."""
