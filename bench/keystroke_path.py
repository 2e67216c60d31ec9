"""Follow one keystroke through the code: the files it visits and the moves between them.

    python -m bench.keystroke_path [--model small] [--show]

One keystroke, as a reviewer would follow it: the LSP handler (`inline_completion` in
lsp/server.py) gets a request for a document whose KV slot is warm, the typed-through cache
misses (the character typed is not what the suggestion said), the model answers, and its stats
go back out. Every Python call made meanwhile, on the event loop and on the model thread, is
recorded; calls within ghostfim's own files (engine/, lsp/, cli/) make the path.

Counting: each distinct call from one function to another in a different file is one move
there, and its return one move back (a loop that calls the same function again is read once).
So `moves` = 2 x the distinct cross-file calls, and `files` = the distinct files entered.

Three paths are counted:
- the main line: the chains of calls from the handler to the effects of a keystroke, that is
  down to the model (every call into engine/local/native.py, the llama.cpp layer) and back out
  to the editor (the ghost text and stats notifications in lsp/wire.py), and what the handler
  itself calls: what a reviewer follows, and what the README's architecture section draws;
- the main line and its pure steps: also every call a function of the main line makes into
  another file that reaches no effect (the plan, the suggestion's clean-up, the KV slots'
  books, the display rule...): what a reviewer who opens every step reads;
- every call: the main line plus each side lookup (a property, a helper that returns at once),
  from anywhere.

One rule for all: a call is on the main line when it leads to the model or to the editor. A
pure step is read by its name and its result (`plan = self.planner.plan(request, parts)`,
`return finish(...)`): its file is one step aside, counted in the second path.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OURS = tuple(str(ROOT / d) + "/" for d in ("engine", "lsp", "cli"))
TEXT = "import math\n\n\ndef norm(values):\n    total = 0\n    for v in values:\n        "
URI = "file:///tmp/keystroke_path.py"


# The main line's ends: calls into the model and what goes out to the editor; and the job's
# hand-over to the model thread, where the Python call chain breaks (the thread runs it later).
KEY_CALLS = {
    ("engine/local/native.py", None),
    ("engine/service/scheduler.py", "submit_completion"),
    ("lsp/wire.py", "ghost_text"),
    ("lsp/wire.py", "stats"),
}
Edge = tuple[str, str, str, str]


class CallRecorder:
    """sys.setprofile hook: the distinct calls between functions of our files."""

    def __init__(self) -> None:
        self.on = False
        self.edges: dict[Edge, None] = {}  # first occurrence order
        self.main: dict[Edge, None] = {}
        self._lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if not self.on or event != "call":
            return
        callee = frame.f_code.co_filename
        if callee.startswith(OURS):
            key = (_short(callee), frame.f_code.co_name)
            if (key[0], None) in KEY_CALLS or key in KEY_CALLS:
                self._main_line(frame)
        caller_frame = frame.f_back
        if caller_frame is None or not callee.startswith(OURS):
            return
        # Walk out of library frames (asyncio, concurrent.futures): the caller is the
        # nearest frame of ours, so a job the worker runs counts as called from its submitter.
        while caller_frame is not None and not caller_frame.f_code.co_filename.startswith(OURS):
            caller_frame = caller_frame.f_back
        if caller_frame is None:
            return
        edge = (
            _short(caller_frame.f_code.co_filename),
            caller_frame.f_code.co_name,
            _short(callee),
            frame.f_code.co_name,
        )
        with self._lock:
            self.edges.setdefault(edge, None)

    def _main_line(self, frame: FrameType) -> None:
        """The chain of our frames that led to this call, outermost first."""
        chain: list[tuple[str, str]] = []
        f: FrameType | None = frame
        while f is not None:
            if f.f_code.co_filename.startswith(OURS):
                chain.append((_short(f.f_code.co_filename), f.f_code.co_name))
            f = f.f_back
        chain.reverse()
        with self._lock:
            for (a, fa), (b, fb) in itertools.pairwise(chain):
                self.main.setdefault((a, fa, b, fb), None)

    def main_line(self) -> list[Edge]:
        """The chains to the key calls, and what the handler itself calls: a coroutine resumed
        by the event loop (or a job's callback) has no Python caller to chain back to."""
        handler = [e for e in self.edges if e[:2] == ("lsp/server.py", "inline_completion")]
        return [*handler, *(e for e in self.main if e not in handler)]

    def with_steps(self) -> list[Edge]:
        """The main line, and each call its functions make into another file."""
        main = self.main_line()
        on_line = {(a, fa) for a, fa, _, _ in main} | {(b, fb) for _, _, b, fb in main}
        steps = [e for e in self.edges if (e[0], e[1]) in on_line and e not in main]
        return [*main, *steps]

    def path(self, which: str) -> list[Edge]:
        if which == "main":
            return self.main_line()
        return self.with_steps() if which == "steps" else list(self.edges)

    def cross_file(self, which: str) -> list[Edge]:
        return [e for e in self.path(which) if e[0] != e[2]]

    def files(self, which: str) -> list[str]:
        seen: dict[str, None] = {}
        for a, _, b, _ in self.path(which):
            seen.setdefault(a, None)
            seen.setdefault(b, None)
        return list(seen)


def _short(path: str) -> str:
    return str(Path(path).relative_to(ROOT))


async def one_keystroke(model: str) -> CallRecorder:
    from lsprotocol import types
    from pygls.workspace import Workspace

    from ghostfim.lsp.server import build_server
    from ghostfim.lsp.settings import parse_settings
    from ghostfim.lsp.textsync import SyncedDocument, document_key

    recorder = CallRecorder()
    sys.setprofile(recorder)
    threading.setprofile(recorder)  # the model thread starts later, with the hook
    server = build_server()

    class Sink:
        def write(self, data: bytes) -> None: ...
        def flush(self) -> None: ...

    server.protocol.set_writer(Sink())
    server.protocol.client_capabilities = types.ClientCapabilities()
    server.protocol._workspace = Workspace(None)  # what initialize would have made
    server.settings = parse_settings({"model": {"size": model}, "debounceMs": 0})[0]
    assert await server.service.configure(server.settings), server.service.host.error
    doc = SyncedDocument(URI, TEXT, 1, "python", "utf-16")
    server.workspace.text_documents[document_key(URI)] = doc
    handler = server.protocol.fm.features[types.TEXT_DOCUMENT_INLINE_COMPLETION]
    line, col = TEXT.count("\n"), len(TEXT.rsplit("\n", 1)[1])

    async def keystroke(ch: str, version: int) -> Any:
        nonlocal col
        pos = types.Position(line, col)
        doc.apply(types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=ch))
        doc.version = version
        server.service.document_changed(URI, doc.source)
        col += len(ch)
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(URI),
            position=types.Position(line, col),
            context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
        )
        result = await handler(params)
        await idle(server)
        return result

    version = 1
    for ch in "total ":  # warm the keystroke slot (the wide window too)
        version += 1
        await keystroke(ch, version)
        await asyncio.sleep(0.6)
        await idle(server)
    recorder.on = True
    await keystroke("#", version + 1)  # "total #": not what any suggestion said
    recorder.on = False
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    await server.service.shutdown()
    return recorder


async def idle(server: Any) -> None:
    for _ in range(3000):
        await asyncio.sleep(0.01)
        if server.service.worker.idle and server.service.followups.idle:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.keystroke_path")
    parser.add_argument("--model", default="small")
    parser.add_argument("--show", action="store_true", help="print every cross-file call")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    recorder = asyncio.run(one_keystroke(args.model))
    print(f"one keystroke (cache miss, warm slot), model {args.model}:")
    paths = (
        ("main", "main line"),
        ("steps", "main line and its pure steps"),
        ("every", "every call"),
    )
    for which, title in paths:
        cross = recorder.cross_file(which)
        files = recorder.files(which)
        print(f"  {title}: {len(files)} files, {2 * len(cross)} moves between files")
        print("    " + ", ".join(files))
        if args.show or which == "main":
            for a, fa, b, fb in cross:
                print(f"      {a}:{fa} -> {b}:{fb}")
    print(f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
