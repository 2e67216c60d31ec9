"""Completion-quality benchmark (`python -m bench.quality`): see bench/quality/run.py."""
