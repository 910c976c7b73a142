"""``python -m agentctx``: the same as the ``agentctx`` command."""

from agentctx._entry import main

main()
