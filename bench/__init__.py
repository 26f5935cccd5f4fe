"""Benchmarks: scripts that measure, not tests. `python -m bench.run`; see bench/README.md.

Nothing here is imported at package import time: the reference server imports
`bench.agent` from a virtual environment that has no `sentient_assist`.
"""
