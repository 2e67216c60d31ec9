"""A digest of the engine's plans over a fixed run of requests: equal digests, equal behaviour.

    python bench/plan_digest.py [--model small] [--file engine/service/completion.py]
    OTHER_BUILD/.venv/bin/python bench/plan_digest.py ...    # the same requests on another build

A refactor of the keystroke path should change who calls whom, not what the model is asked. This
drives one `ModelSession` through keystrokes at a series of places in a real file (keystroke,
background and full requests at each; each keystroke then prefilled, so the KV slots evolve as
they do in use) and hashes every plan: the prompt's tokens and fields, the slot, what the slot
holds, the stable boundary (a field of the prompt at its default value counts as absent, so
builds that add a field can be compared). The prefill cost model and the keystroke windows are
pinned, so the digest does not depend on this machine's speed. Run it with each build's
interpreter (as a script path, so each imports its own `ghostfim`) and compare the last line.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def prompt_fields(prompt: Any) -> tuple[tuple[str, Any], ...]:
    """The prompt's fields, less those at their default: a field a later build adds (say
    `definition_tokens`, 0 unless the workspace's definitions are in the prompt) leaves the
    digest of the same plan as it was."""
    return tuple(
        (f.name, getattr(prompt, f.name))
        for f in dataclasses.fields(prompt)
        if getattr(prompt, f.name) != f.default
    )


def plans_digest(model: str, source: Path) -> tuple[int, str]:
    from ghostfim.engine.backend import CompletionRequest
    from ghostfim.engine.local.loading import open_model_file
    from ghostfim.engine.local.plan import Windows
    from ghostfim.engine.local.speed import PrefillCostModel
    from ghostfim.engine.setup.fetch import find_cached

    path = Path(model) if Path(model).is_file() else find_cached(model)
    if path is None:
        raise SystemExit(f"no model {model!r}: a GGUF path, or a preset `ghostfim models` has")
    session = open_model_file(path, calibrate=False)
    session.planner.windows = Windows(40, 128)
    session.cost = session.planner.cost = PrefillCostModel.pinned("60+8")
    # Builds before the pure plan (15c1c31 and older) planned inside the Planner.
    plan: Any = getattr(session, "plan", None) or session.planner.plan
    lines = source.read_text(encoding="utf-8").split("\n")
    digest, n = hashlib.sha256(), 0
    for place in range(40, min(len(lines) - 1, 600), 23):
        before, target = "\n".join(lines[:place]) + "\n", lines[place]
        after = "\n" + "\n".join(lines[place + 1 :])
        for k in range(min(len(target), 15)):
            prefix = before + target[:k]
            for mode, background in (("keystroke", False), ("keystroke", True), ("full", False)):
                request = CompletionRequest(
                    prefix, after, doc_id="d", mode=mode, max_tokens=0, background=background
                )
                p = plan(request)
                prompt = prompt_fields(p.prompt)
                digest.update(repr((prompt, p.slot.slot, p.slot.cached, p.stable)).encode())
                n += 1
            session.complete(
                CompletionRequest(prefix, after, doc_id="d", mode="keystroke", max_tokens=1)
            )
    session.close()
    return n, digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/plan_digest.py")
    parser.add_argument("--model", default="small")
    parser.add_argument("--file", default=str(ROOT / "engine" / "service" / "completion.py"))
    args = parser.parse_args(argv)
    n, digest = plans_digest(args.model, Path(args.file))
    print(f"{n} plans, digest {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
