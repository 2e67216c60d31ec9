"""A request's prompt parts, tokenized: one per prefix window the plan chooses among
(engine/local/plan.py `Planner.windows_for`), each with the workspace's definitions at the top of
its prefix (engine/prompt/definitions.py), and a full prompt's with the chunks of other files
before that (engine/context/extra.py). The plan itself stays pure: this is where the tokenizer
runs."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.context.extra import ExtraContextBuilder
from ghostfim.engine.local.plan import Planner
from ghostfim.engine.prompt.builder import PromptBuilder, PromptParts
from ghostfim.engine.prompt.definitions import DefinitionTokens


def prompt_parts(
    builder: PromptBuilder,
    extra: ExtraContextBuilder,
    planner: Planner,
    request: CompletionRequest,
    definitions: DefinitionTokens | None = None,
) -> list[PromptParts]:
    """The request's prompt parts, one per window of `planner.windows_for`, tokenized: each
    with the workspace's definitions at the top of its prefix, and a full prompt's with the
    context from other files before that."""
    r = request
    parts = [
        builder.parts(r.doc_id, r.prefix, r.suffix, r.line, window)
        for window in planner.windows_for(r)
    ]
    room = planner.extra_room
    if definitions is not None and r.definitions:
        keystroke = r.mode == "keystroke"
        parts = [definitions.apply(p, r.definitions, planner.cost, room, keystroke) for p in parts]
        room -= parts[0].definition_tokens
    if r.mode == "full":
        parts[0] = extra.apply(parts[0], r.extra_context, planner.cost, room)
    return parts
