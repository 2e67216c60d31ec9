"""How workspace definitions are laid out in a prompt, chosen by measurement (issue 31, §3).

    python -m bench.context_layout --model small [--kinds cross,plain] [--budget 256]
        [--layouts none,comment,repo,stubs-above] [--limit N] [--json PATH]

On the corpus of code the model has not seen (bench/workspace_corpus.py: packages first
published after the model's training, 200 picked lines cut back to their indentation on disk),
each pick is completed once per layout, side by side, with the same prefix and suffix:

- the document is the file's text on disk (the picked line already cut), the cursor at the end
  of the picked line's indentation;
- the prefix is the last ~512 tokens before the cursor (`--prefix-tokens`), cut at a line start;
  the suffix the first ~128 tokens after it, cut at a line end; Qwen's FIM in PSM order. With
  `--plain`, a CPU keystroke's prompt (engine/local/plan.py): the context, then the prefix as
  plain code, no FIM tokens and no suffix;
- the definitions are what the server would take: the package folder indexed
  (engine/context/index.py), `select_definitions` then `fit_block` within `--budget` tokens
  counted with the model's own tokenizer (engine/context/definitions.py).

Layouts (the context is the block of definitions; a pick whose block is empty gets the plain
prompt in every layout, decoded once):

- `none`: plain FIM, this file only;
- `comment`: `block.prompt_text()` right after `<|fim_prefix|>`;
- `repo`: Qwen's repository-level layout, `<|repo_name|>{package}\\n`, then
  `<|file_sep|>{file}\\n{stubs}\\n` per file, then `<|file_sep|>{this file}\\n` and the FIM prompt;
- `stubs-above`: the stubs as plain code at the top of the prefix (as if written above in this
  file), each file's under one comment line naming it;
- `snip-comment`, `snip-code`, `stubs+snip`: the `--snippets` windows of the package's files
  most like the 12 lines before the cursor (engine/context/snippets.py; none from the lines
  around the pick, which the prompt holds), within `--snippet-budget` tokens: as comments
  under "Compare this snippet from <file>:" (Copilot's form), as code under a comment naming
  the file, or as code after the stubs as code;
- `ring-repo`, `ring-code`, `ring+snip`: the `extraContext` ring (engine/context/ring.py) as an
  editor holding the `--neighbors` files nearest by name in the pick's folder open would have
  it (each file's top chunk, ring order, the newest that fit `--ring-budget` tokens, none that
  the prompt's own window holds): in the repository-level layout extraContext uses
  (`<|repo_name|>`, `<|file_sep|>` per chunk, engine/context/extra.py), as code under a
  comment naming the file at the top of the prefix (the snippets' layout), or that followed by
  the snippets as code;
- `imports`, `imports+snip`: the file's own import statements (bench/import_statements.py)
  that end more than 10 lines above the cursor (nearer ones are in a keystroke's window), those
  binding a name used near the cursor first, within `--imports-budget` tokens, as code at the
  top of the prefix; alone, or followed by the snippets as code.

    python -m bench.context_layout --model small --kinds cross,plain \
        --layouts none,stubs-above,snip-comment,snip-code,stubs+snip --limit 80

`--typed-share S` asks mid-line instead of at the line's start: the first S of the picked
line's characters (after its indentation) are typed, and the rest of the line is the answer.

Greedy decoding (llama.cpp through llama_cpp.Llama, token ids built here: the FIM tokens are
the only ones tokenized as special), up to the first newline or 48 tokens. Scores per pick and
layout: `exact` (the first line equals the cut line's text after the indentation, trailing
whitespace stripped), `prefix_share` (the longest common prefix in characters / the expected
line's length), `edit_sim` (1 - Levenshtein distance / the longer line's length). The table
gives them per kind (cross: the line uses a name another module defines; plain; all) with the
context tokens each layout added (mean over the picks that got any definition) and how many
picks got any.

The JSON (`--json`) holds every record and is rewritten after each pick: a run stopped early
keeps what it measured. Picks run in a fixed interleaved order (package by package, kind by
kind), so that `--limit` or an early stop leaves a balanced sample.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.import_statements import fit_imports, imports_above
from ghostfim.engine import env
from ghostfim.engine.context.definitions import (
    DefinitionBlock,
    comment_mark,
    fit_block,
    names_near,
    select_definitions,
)
from ghostfim.engine.context.snippets import query_words
from ghostfim.engine.service.workspace import SNIPPET_SKIP_AFTER, SNIPPET_SKIP_BEFORE

LAYOUTS = ("none", "comment", "repo", "stubs-above")
# Similar code from the workspace (engine/context/snippets.py), alone or after the stubs.
SNIPPET_LAYOUTS = ("snip-comment", "snip-code", "stubs+snip")
# The extraContext ring's chunks of neighbouring files, in the layout it uses and in the snippets'.
RING_LAYOUTS = ("ring-repo", "ring-code", "ring+snip")
# The file's own import statements (bench/import_statements.py) as code, alone or before snippets.
IMPORT_LAYOUTS = ("imports", "imports+snip")
IMPORTS_LINES_ABOVE = 10  # nearer statements are in a keystroke prompt's own window
PREFIX_TOKENS = 512
SUFFIX_TOKENS = 128
MAX_NEW_TOKENS = 48
MODELS = {
    "small": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "medium": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}

# A prompt is a list of parts: text (tokenized as plain text) or a special token's name.
Special = str
Part = tuple[str, str]  # ("text", s) or ("special", "<|fim_prefix|>")


def text(s: str) -> Part:
    return ("text", s)


def special(name: Special) -> Part:
    return ("special", name)


# --- windows ---------------------------------------------------------------------------------
def cursor_offset(document: str, line: int, indent: str) -> int:
    """The offset of the end of `indent` on 0-based `line`."""
    lines = document.split("\n")
    return sum(len(x) + 1 for x in lines[:line]) + len(indent)


def prefix_window(before: str, budget: int, count: Callable[[str], int]) -> str:
    """The end of `before` that fits `budget` tokens, starting at a line start (the cursor's
    own line, up to the cursor, always kept)."""
    lines = before.split("\n")
    kept = [lines[-1]]
    used = count(lines[-1])
    for line in reversed(lines[:-1]):
        n = count(line + "\n")
        if used + n > budget:
            break
        kept.append(line)
        used += n
    return "\n".join(reversed(kept))


def suffix_window(after: str, budget: int, count: Callable[[str], int]) -> str:
    """The start of `after` that fits `budget` tokens, ending at a line end (the rest of the
    cursor's line always kept)."""
    lines = after.split("\n")
    kept = [lines[0]]
    used = count(lines[0])
    for line in lines[1:]:
        n = count("\n" + line)
        if used + n > budget:
            break
        kept.append(line)
        used += n
    return "\n".join(kept)


# --- layouts ---------------------------------------------------------------------------------
def stubs_code(block: DefinitionBlock) -> str:
    """The block's stubs as code of this file: one comment line naming each file, its stubs
    under it; ends with a blank line."""
    mark = comment_mark(block.language)
    parts = [f"{mark} {file}\n{stubs}\n" for file, stubs in block.files()]
    return "\n".join(parts) + "\n" if parts else ""


def snippets_text(snippets: Sequence[tuple[str, str]], mark: str, as_comment: bool) -> str:
    """(file, lines) snippets: as comments under "Compare this snippet from" (Copilot's form),
    or as code under a comment naming the file; ends with a blank line."""
    parts = []
    for file, body in snippets:
        if as_comment:
            lines = "\n".join(f"{mark} {x}".rstrip() for x in body.split("\n"))
            parts.append(f"{mark} Compare this snippet from {file}:\n{lines}\n")
        else:
            parts.append(f"{mark} {file}\n{body}\n")
    return "\n".join(parts) + "\n" if parts else ""


def build_prompt(
    layout: str,
    prefix: str,
    suffix: str,
    block: DefinitionBlock,
    project: str,
    current: str,
    snippets: Sequence[tuple[str, str]] = (),
    ring: Sequence[tuple[str, str]] = (),
    imports: str = "",
) -> tuple[list[Part], list[Part]]:
    """(context parts, FIM parts): the prompt is their concatenation; the context parts are
    what the layout adds to plain FIM (none when the block is empty)."""
    fim_tail = [text(prefix), special("<|fim_suffix|>"), text(suffix), special("<|fim_middle|>")]
    mark = comment_mark(block.language)
    if layout in IMPORT_LAYOUTS:
        extra = imports + "\n\n" if imports else ""
        if layout == "imports+snip":
            extra += snippets_text(snippets, mark, as_comment=False)
        if not extra:
            return [], [special("<|fim_prefix|>"), *fim_tail]
        return [text(extra)], [special("<|fim_prefix|>"), *fim_tail]
    if layout in RING_LAYOUTS:
        if not ring:
            return [], [special("<|fim_prefix|>"), *fim_tail]
        if layout == "ring-repo":
            context: list[Part] = [special("<|repo_name|>"), text(f"{project}\n")]
            for file, body in ring:
                context += [special("<|file_sep|>"), text(f"{file}\n{body}\n")]
            context += [special("<|file_sep|>"), text(f"{current}\n")]
            return context, [special("<|fim_prefix|>"), *fim_tail]
        chunks = snippets_text(ring, mark, as_comment=False)
        if layout == "ring+snip":
            chunks = chunks.rstrip("\n") + "\n\n" + snippets_text(snippets, mark, as_comment=False)
        return [text(chunks)], [special("<|fim_prefix|>"), *fim_tail]
    if layout in SNIPPET_LAYOUTS:
        stubs = stubs_code(block) if layout == "stubs+snip" and block else ""
        extra = snippets_text(snippets, mark, as_comment=layout == "snip-comment")
        if not (stubs or extra):
            return [], [special("<|fim_prefix|>"), *fim_tail]
        return [text(stubs + extra)], [special("<|fim_prefix|>"), *fim_tail]
    if layout == "none" or not block:
        return [], [special("<|fim_prefix|>"), *fim_tail]
    if layout == "comment":
        return [text(block.prompt_text())], [special("<|fim_prefix|>"), *fim_tail]
    if layout == "stubs-above":
        return [text(stubs_code(block))], [special("<|fim_prefix|>"), *fim_tail]
    if layout == "repo":
        context = [special("<|repo_name|>"), text(f"{project}\n")]
        for file, stubs in block.files():
            context += [special("<|file_sep|>"), text(f"{file}\n{stubs}\n")]
        context += [special("<|file_sep|>"), text(f"{current}\n")]
        return context, [special("<|fim_prefix|>"), *fim_tail]
    raise ValueError(f"unknown layout {layout!r}")


def assemble(layout: str, context: list[Part], fim: list[Part]) -> list[Part]:
    """The prompt's parts in order: `repo`'s context before everything; `comment`'s and
    `stubs-above`'s after `<|fim_prefix|>` (the top of the prefix)."""
    at_top = ("comment", "stubs-above", "ring-code", "ring+snip", *SNIPPET_LAYOUTS, *IMPORT_LAYOUTS)
    if layout in at_top and context:
        return [fim[0], *context, *fim[1:]]
    return [*context, *fim]


def render(parts: Sequence[Part]) -> str:
    """The prompt as text (for tests and for reading)."""
    return "".join(s for _, s in parts)


# --- scoring ---------------------------------------------------------------------------------
def first_line(generated: str) -> str:
    return generated.split("\n", 1)[0].rstrip()


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            cur = min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
            prev, row[j] = row[j], cur
    return row[-1]


@dataclass(frozen=True)
class Score:
    exact: bool
    prefix_share: float
    edit_sim: float


def score(generated: str, expected: str) -> Score:
    """`generated`: the model's text from the cursor; `expected`: the line's text after its
    indentation."""
    got = first_line(generated)
    want = expected.rstrip()
    if not want:
        return Score(got == want, float(got == want), float(got == want))
    share = common_prefix(got, want) / len(want)
    sim = 1.0 - levenshtein(got, want) / max(len(got), len(want))
    return Score(got == want, share, sim)


# --- summary ---------------------------------------------------------------------------------
@dataclass
class Cell:
    n: int = 0
    exact: int = 0
    share: float = 0.0
    sim: float = 0.0
    with_context: int = 0
    context_tokens: int = 0


GROUPS = ("cross", "plain", "all")
# Cross picks split by whether the block held the definition of the name the line uses.
GIVEN, NOT_GIVEN = "cross, name in block", "cross, name not in block"


@dataclass
class Summary:
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def add(
        self, kind: str, layout: str, s: Score, context_tokens: int, extra: Sequence[str] = ()
    ) -> None:
        for k in (kind, "all", *extra):
            c = self.cells.setdefault((k, layout), Cell())
            c.n += 1
            c.exact += s.exact
            c.share += s.prefix_share
            c.sim += s.edit_sim
            if context_tokens:
                c.with_context += 1
                c.context_tokens += context_tokens

    def table(self, layouts: Sequence[str], groups: Sequence[str] = GROUPS) -> str:
        rows = [
            "| kind | layout | n | first line exact | share of line right (prefix) | edit sim "
            "| picks with context | context tokens (mean, those) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for kind in groups:
            for layout in layouts:
                c = self.cells.get((kind, layout))
                if c is None or not c.n:
                    continue
                mean_ctx = c.context_tokens / c.with_context if c.with_context else 0.0
                rows.append(
                    f"| {kind} | {layout} | {c.n} | {c.exact}/{c.n} ({c.exact / c.n:.3f}) "
                    f"| {c.share / c.n:.3f} | {c.sim / c.n:.3f} | {c.with_context} "
                    f"| {mean_ctx:.0f} |"
                )
        return "\n".join(rows)


def summarize(records: Sequence[dict], layouts: Sequence[str], lenient: bool = False) -> Summary:
    """The summary of a run's records, scored again from each layout's first line; `lenient`:
    the generated line's leading whitespace ignored (the prompt ends with the indentation, and
    without token healing the model sometimes indents again)."""
    summary = Summary()
    for r in records:
        extra = [] if r["kind"] != "cross" else [GIVEN if r["used_name_given"] else NOT_GIVEN]
        for layout in layouts:
            entry = r["layouts"].get(layout)
            if entry is None:
                continue
            got = entry["generated"].lstrip() if lenient else entry["generated"]
            summary.add(
                r["kind"], layout, score(got, r["expected"]), entry["context_tokens"], extra
            )
    return summary


def report(records: Sequence[dict], layouts: Sequence[str]) -> str:
    """The tables of a run: strict, lenient, and cross split by whether the name was given."""
    groups = (*GROUPS, GIVEN, NOT_GIVEN)
    strict = summarize(records, layouts).table(layouts, groups)
    lenient = summarize(records, layouts, lenient=True).table(layouts, GROUPS)
    return (
        f"{len(records)} picks; first line as generated:\n\n{strict}\n\n"
        f"leading whitespace of the generated line ignored:\n\n{lenient}"
    )


def interleave(picks: Sequence[dict], kinds: Sequence[str]) -> list[dict]:
    """Round robin over (package, kind), keeping each group's manifest order."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for p in picks:
        if p["kind"] in kinds:
            groups.setdefault((p["package"], p["kind"]), []).append(p)
    out: list[dict] = []
    queues = list(groups.values())
    i = 0
    while any(queues):
        for q in queues:
            if len(q) > i:
                out.append(q[i])
        i += 1
        if all(len(q) <= i for q in queues):
            break
    return out


# --- the model -------------------------------------------------------------------------------
class Model:
    """Greedy first-line completion on token ids built here."""

    def __init__(self, path: str) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.llm = llama_cpp.Llama(
            model_path=path, n_ctx=2048, n_threads=2, verbose=False, flash_attn=True
        )
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._specials: dict[str, int] = {}
        self._pieces: dict[int, bytes] = {}

    def count(self, s: str) -> int:
        return len(self.tokens(s))

    def tokens(self, s: str) -> list[int]:
        return self.llm.tokenize(s.encode("utf-8"), add_bos=False, special=False) if s else []

    def special(self, name: str) -> int:
        if name not in self._specials:
            ids = self.llm.tokenize(name.encode(), add_bos=False, special=True)
            if len(ids) != 1:
                raise ValueError(f"{name} is not one token: {ids}")
            self._specials[name] = ids[0]
        return self._specials[name]

    def ids(self, parts: Sequence[Part]) -> list[int]:
        out: list[int] = []
        for kind, s in parts:
            out += [self.special(s)] if kind == "special" else self.tokens(s)
        return out

    def piece(self, token: int) -> bytes:
        if token not in self._pieces:
            size = 64
            while True:
                buf = ctypes.create_string_buffer(size)
                n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, False)
                if n >= 0:
                    break
                size = -n + 1
            self._pieces[token] = buf.raw[:n]
        return self._pieces[token]

    def stops_at(self, token: int) -> bool:
        lib = self._lib
        return bool(
            lib.llama_vocab_is_eog(self._vocab, token)
            or lib.llama_vocab_is_control(self._vocab, token)
        )

    def first_line(self, prompt: list[int]) -> tuple[str, int]:
        """The greedy continuation up to its first newline (or MAX_NEW_TOKENS); its tokens."""
        out = b""
        n = 0
        for token in self.llm.generate(prompt, temp=0.0, top_k=1, reset=True):
            if self.stops_at(token):
                break
            out += self.piece(token)
            n += 1
            if b"\n" in out or n >= MAX_NEW_TOKENS:
                break
        return out.decode("utf-8", errors="replace"), n


def ring_chunks(
    path: Path, window: str, neighbors: int, budget: int, count: Callable[[str], int]
) -> list[tuple[str, str]]:
    """(file, chunk) of the extraContext ring as an editor would hold it with the `neighbors`
    files nearest by name in `path`'s folder opened before it (each file's top chunk, as the
    ring picks at didOpen; engine/context/ring.py), ring order, the newest that fit `budget`
    tokens, none that `window` (the prompt's own text) mostly holds."""
    from ghostfim.engine.context.ring import IN_WINDOW, ContextRing, containment, key_lines

    folder = sorted(p for p in path.parent.iterdir() if p.suffix == path.suffix)
    at = folder.index(path)
    nearest = sorted((p for p in folder if p != path), key=lambda p: abs(folder.index(p) - at))
    ring = ContextRing()
    for other in reversed(nearest[:neighbors]):  # the nearest opened last: the newest
        ring.pick(other.read_text(encoding="utf-8", errors="replace"), str(other))
    ring.commit(force=True)
    seen = key_lines(window)
    chosen: list[tuple[str, str]] = []
    left = budget
    for chunk in reversed(ring.snapshot()):  # the newest first, each if it still fits
        n = count(f"{chunk.filename}\n{chunk.text}")
        if containment(chunk.lines, seen) < IN_WINDOW and n <= left:
            chosen.append((chunk.filename, chunk.text.rstrip("\n")))
            left -= n
    return chosen[::-1]


# --- the run ---------------------------------------------------------------------------------
def language_of(path: str) -> str:
    return "python" if path.endswith(".py") else "typescript"


def run(args: argparse.Namespace) -> int:
    from ghostfim.engine.context.index import WorkspaceIndex

    bench_dir = env.cache_dir() / "bench"
    manifest = json.loads((bench_dir / "workspace-manifest.json").read_text())
    workspace = Path(manifest["workspace"])
    folders = {p["name"]: p["folder"] for p in manifest["packages"]}
    kinds = args.kinds.split(",")
    layouts = args.layouts.split(",")
    picks = interleave(manifest["picks"], kinds)
    if args.limit:
        picks = picks[: args.limit]
    model_path = args.model
    if args.model in MODELS:
        model_path = str(env.cache_dir() / "models" / MODELS[args.model])
    model = Model(model_path)
    indexes: dict[str, WorkspaceIndex] = {}
    summary = Summary()
    records: list[dict] = []
    started = time.perf_counter()
    for i, pick in enumerate(picks):
        folder = folders[pick["package"]]
        root = workspace / folder
        if folder not in indexes:
            index = WorkspaceIndex()
            index.start([root])
            index.wait(120)
            indexes[folder] = index
        index = indexes[folder]
        path = str(workspace / pick["file"])
        document = Path(path).read_text(encoding="utf-8")
        at = cursor_offset(document, pick["line"], pick["indent"])
        expected = pick["text"][len(pick["indent"]) :]
        # --typed-share: the user typed this much of the line (mid-line ghost text); the
        # expected completion is the rest.
        typed = expected[: round(args.typed_share * len(expected))]
        expected = expected[len(typed) :]
        prefix = prefix_window(document[:at] + typed, args.prefix_tokens, model.count)
        suffix = "" if args.plain else suffix_window(document[at:], SUFFIX_TOKENS, model.count)

        def relative(p: str, root: Path = root) -> str:
            return Path(os.path.relpath(p, root)).as_posix()

        picked = select_definitions(index, path, document, pick["line"], relative)
        block = fit_block(language_of(path), picked, args.budget, model.count)
        current = relative(path)
        snippets: list[tuple[str, str]] = []
        if any(lay in (*SNIPPET_LAYOUTS, "ring+snip", "imports+snip") for lay in layouts):
            # The ranking the server uses: the index's snippet store (inverted index, the
            # commonest words skipped), then the hit's lines read from disk.
            skip_before = args.snippet_skip_before
            near = [(path, pick["line"] - skip_before, pick["line"] + SNIPPET_SKIP_AFTER)]
            used = 0
            for hit in index.similar(query_words(document[:at] + typed), args.snippets, skip=near):
                lines = Path(hit.path).read_text(encoding="utf-8", errors="replace").split("\n")
                window = "\n".join(lines[hit.line : hit.end])
                n = model.count(window)
                if used + n > args.snippet_budget:
                    continue
                used += n
                snippets.append((relative(hit.path), window))
        ring: list[tuple[str, str]] = []
        if any(lay in RING_LAYOUTS for lay in layouts):
            ring = ring_chunks(
                Path(path), prefix + suffix, args.neighbors, args.ring_budget, model.count
            )
            ring = [(relative(file), body) for file, body in ring]
        imports = ""
        if any(lay in IMPORT_LAYOUTS for lay in layouts):
            # The statements further above the cursor than a keystroke's window (about 10
            # lines), those binding a name used near the cursor first, within --imports-budget.
            near = names_near(document, pick["line"])
            used_words = frozenset(part for name in near for part in name.split("."))
            above = imports_above(
                document[:at], language_of(path), pick["line"], IMPORTS_LINES_ABOVE, used_words
            )
            fitted = fit_imports(above, args.imports_budget, model.count)
            imports = "\n".join(s.text for s in fitted)
        record: dict = {
            "package": pick["package"],
            "kind": pick["kind"],
            "file": pick["file"],
            "line": pick["line"],
            "expected": expected,
            "uses": [u[0] for u in pick["uses"]],
            "definitions": list(block.names),
            "candidates": len(picked),
            "used_name_given": any(u[0].split(".")[-1] in block.names for u in pick["uses"]),
            "snippets": [f for f, _ in snippets],
            "ring": [f for f, _ in ring],
            "imports": imports.count("\n") + 1 if imports else 0,
            "used_name_in_snippets": any(
                u[0].split(".")[-1] in body for u in pick["uses"] for _, body in snippets
            ),
            "layouts": {},
        }
        plain: dict | None = None
        for layout in layouts:
            context, fim = build_prompt(
                layout, prefix, suffix, block, pick["package"], current, snippets, ring, imports
            )
            if not context and plain is not None:
                record["layouts"][layout] = dict(plain, same_as_none=True)
                summary.add(pick["kind"], layout, Score(**plain["score"]), 0)
                continue
            if args.plain:  # a CPU keystroke's prompt: the context, then the prefix as code
                ids = model.ids([*context, text(prefix)])
            else:
                ids = model.ids(assemble(layout, context, fim))
            t0 = time.perf_counter()
            generated, n_new = model.first_line(ids)
            s = score(generated, expected)
            ctx_tokens = len(model.ids(context)) if context else 0
            entry = {
                "generated": first_line(generated),
                "score": asdict(s),
                "prompt_tokens": len(ids),
                "context_tokens": ctx_tokens,
                "new_tokens": n_new,
                "seconds": round(time.perf_counter() - t0, 2),
            }
            record["layouts"][layout] = entry
            if not context:
                plain = entry
            summary.add(pick["kind"], layout, s, ctx_tokens)
        records.append(record)
        elapsed = time.perf_counter() - started
        marks = " ".join(
            f"{lay}:{'Y' if record['layouts'][lay]['score']['exact'] else '.'}" for lay in layouts
        )
        print(
            f"[{i + 1}/{len(picks)} {elapsed:.0f}s] {pick['kind']:5} {pick['package']:14} "
            f"defs={len(block.names)} {marks}",
            file=sys.stderr,
            flush=True,
        )
        if args.json:
            write_json(args, records, summary, layouts, elapsed)
    for index in indexes.values():
        index.stop()
    print(f"\n{args.model}, budget {args.budget}\n")
    print(report(records, layouts))
    return 0


def write_json(
    args: argparse.Namespace,
    records: list[dict],
    summary: Summary,
    layouts: Sequence[str],
    elapsed: float,
) -> None:
    out = {
        "model": args.model,
        "budget": args.budget,
        "kinds": args.kinds,
        "layouts": list(layouts),
        "prefix_tokens": args.prefix_tokens,
        "suffix_tokens": 0 if args.plain else SUFFIX_TOKENS,
        "plain": args.plain,
        "typed_share": args.typed_share,
        "snippet_budget": args.snippet_budget,
        "snippet_skip_before": args.snippet_skip_before,
        "picks": len(records),
        "seconds": round(elapsed),
        "table": summary.table(layouts),
        "summary": {f"{k}/{lay}": asdict(c) for (k, lay), c in sorted(summary.cells.items())},
        "records": records,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="small", help="small, medium or a GGUF path")
    ap.add_argument("--kinds", default="cross,plain")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--budget", type=int, default=256, help="tokens for the definitions")
    ap.add_argument("--snippets", type=int, default=2, help="similar windows at most")
    ap.add_argument("--snippet-budget", type=int, default=320, help="tokens for the snippets")
    ap.add_argument(
        "--snippet-skip-before",
        type=int,
        default=SNIPPET_SKIP_BEFORE,
        help="lines above the cursor whose windows of the current file are no snippets",
    )
    ap.add_argument("--neighbors", type=int, default=3, help="files open for the ring")
    ap.add_argument("--ring-budget", type=int, default=512, help="tokens for the ring's chunks")
    ap.add_argument(
        "--typed-share", type=float, default=0.0, help="share of the line typed before asking"
    )
    ap.add_argument("--imports-budget", type=int, default=128, help="tokens for the imports")
    ap.add_argument("--limit", type=int, default=0, help="the first N picks (interleaved)")
    ap.add_argument(
        "--prefix-tokens", type=int, default=PREFIX_TOKENS, help="the prefix window's tokens"
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="a CPU keystroke's prompt: the context, then the prefix as plain code, no suffix",
    )
    ap.add_argument("--json", default="")
    ap.add_argument("--report", default="", help="print the tables of a run's JSON; no model")
    args = ap.parse_args(argv)
    if args.report:
        data = json.loads(Path(args.report).read_text(encoding="utf-8"))
        print(f"{data['model']}, budget {data['budget']}, {data['seconds']} s\n")
        print(report(data["records"], data["layouts"]))
        return 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
