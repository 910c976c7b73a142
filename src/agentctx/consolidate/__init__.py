"""Offline consolidation (issue 5): the orchestration of its steps arrives here."""
