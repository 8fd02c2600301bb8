"""Benchmarks (pytest-benchmark, seeded data); run outside the default test suite."""
