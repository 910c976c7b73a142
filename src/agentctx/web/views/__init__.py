"""The dashboard's pages as functions from plain data to :class:`~agentctx.web.html.Safe` HTML.

One module per view; :mod:`.page` holds the shell and the small parts they share. Views never touch
the store: the handlers gather the data (:mod:`agentctx.web.queries`) and pass it in.
"""
