"""The repository's development tools (not installed with the product).

Scripts run from a checkout (``tools/vcluster``, ``tools/demo``,
``tools/burnin``, ``tools/bench/``, ``tools/soak/``); the importable
development harness they share is :mod:`tools.harness`.
"""
