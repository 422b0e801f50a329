"""The benchmark of the card's method (docs/benchmark-method.md): prompt set, suites, checks, records.

Its own layer, between `tui` (the Bench pane renders it) and `recipe` (the live model it refuses on).
"""
