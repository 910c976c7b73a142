"""``agentctx ui``: a local web dashboard to inspect, correct and see the context store (ADR-015).

Starlette and uvicorn (already installed with mcp) serve HTML rendered on the server, with two
small hand-written scripts and one stylesheet as package data: no front-end toolchain, no
third-party browser code, nothing to build. The modules:

* :mod:`.server` binds 127.0.0.1 and runs uvicorn in the caller's event loop;
* :mod:`.security` is the request guard (Host, cross-site, token, no cookies, CSP);
* :mod:`.app` holds the routes, thin adapters over the library (P-8);
* :mod:`.queries` gathers what each view shows from the library;
* :mod:`.views` renders pages from plain data, escaping through :mod:`.html`;
* :mod:`.graph` reads the graph (records, files, branches, links) from the store;
* :mod:`.forcelayout` lays the graph out on the server.
"""
