"""bench/guide_coverage.py: the kinds of dot it counts and what it calls a harm."""

from __future__ import annotations

import random

from bench.guide_coverage import is_allowed, kind_of, sample_sites
from ghostfim.engine.context.guide import MemberGuide

POOL = frozenset({"tasks", "close", "__init__"})


def lookup(dotted: str) -> frozenset[str] | None:
    return POOL if dotted == "Pool()" else None


def test_the_kind_of_name_before_the_dot() -> None:
    before = "def f(pool: Pool, n):\n    m = make()\n    k = 1\n    return "
    assert kind_of(before, "pool") == "local, annotated or called"
    assert kind_of(before, "m") == "local, annotated or called"  # the index says what make returns
    assert kind_of(before, "k") == "other local"
    assert kind_of(before, "n") == "other local"
    assert kind_of(before, "os") == "module or class"
    assert kind_of(before, "self") == "self"


def test_a_name_the_guide_would_not_let_through_is_a_harm() -> None:
    guide = MemberGuide(lookup, "def f(pool: Pool):\n    pool.")
    assert is_allowed(guide, "tasks")
    assert is_allowed(guide, "__init__")  # once `__` is typed
    assert not is_allowed(guide, "size")
    unguided = MemberGuide(lookup, "def f(pool):\n    pool.")
    assert is_allowed(unguided, "size")


def test_sites_in_comments_and_imports_are_not_sampled() -> None:
    sites = sample_sites("import os.path\n# see a.b\nx = pool.tasks\n", random.Random(1), 10)
    assert [s.group(0) for s in sites] == ["pool.tasks"]
