"""The own eval (seed OQ-4): a seeded project, scripted sessions, a labelled key, recorded answers.

``run.py`` runs it (``python3 -m nox -s eval``); ``author.py`` writes the transcripts from the session
scripts; ``replay.py`` serves the recorded model answers; ``scoring.py`` holds the matching rule and
the metrics; ``figures.py`` turns a run into numbers; ``report.py`` writes the results file.
"""
