"""What the context tests share: distinct lines of code, a clock, a ring that commits at once."""

from __future__ import annotations

from ghostfim.engine.context.ring import ContextRing


def code(name: str, n: int = 20, start: int = 0) -> str:
    """n distinct lines of code about `name`."""
    return "".join(
        f"    {name}_{i} = compute_{name}({i}, {i * 7})\n" for i in range(start, start + n)
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ring(**kwargs: object) -> ContextRing:
    kwargs.setdefault("update_interval_s", 0.0)
    return ContextRing(**kwargs)  # type: ignore[arg-type]
