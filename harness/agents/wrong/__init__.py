"""Deliberately wrong agents, shipped for tests: each breaks one rule of the articles.

Run one as `python -m harness.agents.wrong.<name>`. Their flaws, and the scenarios and rule codes
that must catch them, are listed in `harness/expected_outcomes.yaml`.
"""
