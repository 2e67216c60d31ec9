"""A small module to try ghostfim on: `make demo` completes inside stddev()."""

import math


def mean(values):
    """Arithmetic mean of a non-empty list."""
    return sum(values) / len(values)


def variance(values):
    """Population variance."""
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)


def stddev(values):
    """Population standard deviation."""
    

def zscores(values):
    """How many standard deviations each value lies from the mean."""
    m, s = mean(values), stddev(values)
    return [(v - m) / s for v in values]
