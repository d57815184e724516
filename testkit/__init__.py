"""Helpers for the test tiers, the e2e suite and the benchmarks; never imported by the controllers.

Kept out of ``kruntime`` (the runtime the controllers ship) because they poll and raise
``AssertionError``, which only a test or a benchmark wants.
"""
