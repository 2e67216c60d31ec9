"""Completion-quality benchmark (`python -m ghostfim.bench.quality`): see bench/quality/run.py."""
