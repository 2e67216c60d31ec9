"""The workspace index: the outline of every source file of the workspace, and the names one
file imports resolved to the definitions other files hold.

It knows nothing of LSP: the caller gives it the workspace's root folders, the open documents'
text (debounced: at most every few seconds while the user types), and the files that changed or
went on disk (`workspace/didChangeWatchedFiles`, or a save), or asks for a `rescan` now and then
where the editor watches nothing.

All of the work runs in one background thread (daemon) that the index starts: the first build,
then the updates in the order they came; an open document's texts are coalesced to its newest.
Nothing of it is on the keystroke path, and queries only look things up (under a lock held for
dict lookups). But the thread holds the GIL while the parser runs on one file (Python's `ast`
does not let go of it), and another thread of the process waits that long: a thread ticking
every 1 ms waited 108 ms at most (p99 31 ms) while the bench corpus was indexed, 382 ms (p99
77 ms) on a site-packages of 4,241 files, whose largest files are near the 512 kB cap
(bench/workspace_corpus.py --measure, on 2 shared cores). The thread runs at a lower priority
(INDEX_NICE, Linux) so that the model's threads get the cores first, and its caller holds it
while a model loads (`hold`): the load times the model's prefill to size every keystroke's
window, and an index scanning beside it made the server measure a slower machine than it is.

Bounded (files.Limits): a cap on files, on each file's size (larger ones are skipped), on the
source read and on what the index keeps; past a cap the index holds what it had (`capped`).
Safety (files.py): nothing in the workspace is run, imported or followed out of it.

What is kept and how names resolve: engine/context/outline.py, pyoutline.py, jsoutline.py,
resolve.py.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ghostfim.engine.context.files import (
    SKIP_DIRS,
    Ignores,
    Limits,
    Root,
    is_minified,
    language_of,
    read_source,
    walk,
)
from ghostfim.engine.context.jsoutline import js_outline
from ghostfim.engine.context.outline import OBJECT_BYTES, Definition
from ghostfim.engine.context.pyoutline import python_outline
from ghostfim.engine.context.resolve import IndexedFile, Resolver, python_module_keys
from ghostfim.engine.context.snippets import Hit, SnippetStore, windows_of
from ghostfim.engine.memory import ENTRY_BYTES, CacheUsage, str_bytes

log = logging.getLogger("ghostfim.index")

State = Literal["off", "indexing", "ready", "capped"]
# The index thread's nice value (Linux: a thread has its own): the model's threads, which a
# keystroke waits for, get the cores first. (Beside a build at the default priority, the
# server measured the model's prefill speed up to a third slower while loading, and sized
# every keystroke's window by that: docs/benchmarks.md.)
INDEX_NICE = 10
STOP_WAIT_S = 5.0  # stop() waits this long for the thread (it checks between files)
# `hold()` keeps the thread waiting between files for at most this long: a load that takes
# longer (a model downloading) has no claim on the CPU worth the index's delay.
HOLD_MAX_S = 30.0
# A window's share of the snippet store, besides its word ids (4 bytes each) and the
# vocabulary: its entries in the store's arrays and postings. (The bench corpus: 85,000
# windows, 34 MB as tracemalloc sees the store.)
WINDOW_BYTES = 300


@dataclass(frozen=True)
class IndexStatus:
    """What `ghostfim/status` reports as `workspace`."""

    state: State
    files: int
    definitions: int
    bytes: int  # what the index keeps (an estimate of CPython's allocations)
    index_ms: int | None  # the last full scan's duration; None until one finished


# The thread's work: ("scan", ""), ("document", path), ("changed", path), ("deleted", path).
_Task = tuple[str, str]


class WorkspaceIndex:
    def __init__(
        self,
        limits: Limits | None = None,
        skip_dirs: frozenset[str] = SKIP_DIRS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or Limits()
        self.skip_dirs = skip_dirs
        self.clock = clock
        self._lock = threading.Lock()  # the data below, between the thread and the queries
        self._files: dict[str, IndexedFile] = {}
        self._modules: dict[str, list[str]] = {}
        self._resolver = Resolver(self._files, self._modules)
        self._snippets = SnippetStore()  # every file's windows of lines, by their identifiers
        self._source_bytes = 0
        self._held_bytes = 0
        self._definitions = 0
        self._state: State = "off"
        self._capped = False
        self._index_ms: int | None = None
        self._documents: dict[str, str] = {}  # the newest text of each document queued
        self._roots: list[tuple[Root, Ignores]] = []
        self._packages: dict[str, bool] = {}  # directory -> holds an __init__.py (thread only)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0  # tasks queued or running
        self._go = threading.Event()  # cleared while held: the thread waits between files
        self._go.set()
        self._held_since: float | None = None

    # --- life ----------------------------------------------------------------------------------
    def start(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        """Index `roots` (the workspace folders) from scratch in the background; a build under
        way is stopped first. No roots: the index is off."""
        self.stop()
        real: dict[str, Root] = {}
        for given in roots:
            root = Root.of(given)
            if os.path.isdir(root.real):
                real.setdefault(root.real, root)  # one folder named twice is indexed once
        if not real:
            return
        self._roots = [(root, Ignores(root)) for root in real.values()]
        self._stop = threading.Event()
        self._tasks = queue.SimpleQueue()
        with self._lock:
            self._state = "indexing"
        self._thread = threading.Thread(
            target=self._run,
            args=(self._stop, self._tasks),
            name="ghostfim-workspace-index",
            daemon=True,
        )
        self._thread.start()
        self._queue(("scan", ""))

    def stop(self) -> None:
        """Stop the thread (it finishes the file it is on) and drop everything: the index is
        off until the next start."""
        self._stop.set()
        self._tasks.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(STOP_WAIT_S)
        self._thread = None
        with self._lock:
            self._files.clear()
            self._modules.clear()
            self._documents.clear()
            self._snippets.clear()
            self._source_bytes = self._held_bytes = self._definitions = 0
            self._state = "off"
            self._capped = False
            self._index_ms = None
        self._roots = []
        self._packages = {}
        with self._idle:
            self._pending = 0
            self._idle.notify_all()

    def hold(self, held: bool) -> None:
        """Hold the thread between files (a model is loading and timing its prefill), or let
        it go on. A hold lasts HOLD_MAX_S at most; it outlives restarts of the index."""
        if not held:
            self._held_since = None
            self._go.set()
        elif self._held_since is None:  # a hold asked again goes on from its start
            self._held_since = time.monotonic()
            self._go.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the thread has done all it was given; False on timeout (tests, benches)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    # --- updates -------------------------------------------------------------------------------
    def update_document(self, path: str | os.PathLike[str], text: str) -> None:
        """An open document's text (the editor's, which may be unsaved or broken)."""
        if not self._roots:
            return
        key = os.path.abspath(os.fspath(path))
        with self._lock:
            queued = key in self._documents
            self._documents[key] = text
        if not queued:
            self._queue(("document", key))

    def file_changed(self, path: str | os.PathLike[str]) -> None:
        """A file changed or appeared on disk (also: a document closed, its text now the
        disk's). A changed `.gitignore` makes the whole workspace scanned again."""
        if self._roots:
            self._queue(("changed", os.path.abspath(os.fspath(path))))

    def file_deleted(self, path: str | os.PathLike[str]) -> None:
        """A file or a directory went (everything indexed under it goes)."""
        if self._roots:
            self._queue(("deleted", os.path.abspath(os.fspath(path))))

    def rescan(self) -> None:
        """Walk the workspace again: read files whose size or time changed, drop those gone
        (where the editor reports no file events)."""
        if self._roots:
            self._queue(("scan", ""))

    # --- queries -------------------------------------------------------------------------------
    def status(self) -> IndexStatus:
        with self._lock:
            return IndexStatus(
                self._state,
                len(self._files),
                self._definitions,
                self._held_bytes,
                self._index_ms,
            )

    def usage(self) -> CacheUsage:
        with self._lock:
            return CacheUsage("workspaceIndex", self._held_bytes, self.limits.memory_bytes)

    def similar(
        self, query: frozenset[str], count: int, skip: Sequence[tuple[str, int, int]] = ()
    ) -> list[Hit]:
        """The windows of the workspace's files most like `query` (engine/context/snippets.py);
        `skip`: (path, first line, end line) ranges the prompt already holds."""
        keyed = [(self._key(p) or p, first, end) for p, first, end in skip]
        with self._lock:
            return self._snippets.query(query, count, keyed)

    def paths(self) -> list[str]:
        """The files the index holds, sorted."""
        with self._lock:
            return sorted(self._files)

    def file(self, path: str | os.PathLike[str]) -> IndexedFile | None:
        """What the index holds of a file: its outline, module path, size."""
        with self._lock:
            return self._files.get(self._key(path) or "")

    def imports_of(self, path: str | os.PathLike[str]) -> list[tuple[str, str | None]]:
        """The modules a file imports, as written, with the workspace file each resolves to."""
        with self._lock:
            file = self._files.get(self._key(path) or "")
            if file is None:
                return []
            out = []
            for module in file.outline.imports:
                target = self._resolver.module(file, module)
                out.append((module, target.path if target else None))
            return out

    def definitions_for(
        self, path: str | os.PathLike[str], names: Iterable[str]
    ) -> list[Definition]:
        """The definitions, in the workspace, of the names (`A`, `m.A`) that the file imports:
        in the order of `names`, one per definition."""
        with self._lock:
            file = self._files.get(self._key(path) or "")
            return [] if file is None else self._resolver.definitions_for(file, names)

    def class_bases(self, path: str | os.PathLike[str], line: int) -> list[Definition]:
        """The definitions of the bases of the innermost class around `line` (0-based) that
        the workspace holds (imported, or in the same file)."""
        with self._lock:
            file = self._files.get(self._key(path) or "")
            return [] if file is None else self._resolver.class_bases(file, line)

    def members(
        self, path: str | os.PathLike[str], dotted: str, line: int | None = None
    ) -> frozenset[str] | None:
        """Every name `dotted.` may go on with in the file at `line` (a workspace module's,
        class's or instance's; None where that list may be incomplete or unknown):
        engine/context/guide.py. None too until the index is whole (`ready`): a package's
        submodules, a class's bases may be missing while it builds, or where a cap left
        files out."""
        with self._lock:
            file = self._files.get(self._key(path) or "")
            if file is None or self._state != "ready":
                return None
            return self._resolver.members(file, dotted, line)

    def _key(self, path: str | os.PathLike[str]) -> str | None:
        """A path as the index keys it (under its root's real path)."""
        given = os.path.abspath(os.fspath(path))
        if given in self._files:
            return given
        for root, _ in self._roots:
            rel = root.relative(given)
            if rel is not None:
                return os.path.join(root.real, rel)
        return None

    # --- the thread ----------------------------------------------------------------------------
    def _queue(self, task: _Task) -> None:
        with self._idle:
            self._pending += 1
        self._tasks.put(task)

    def _run(self, stop: threading.Event, tasks: queue.SimpleQueue[_Task | None]) -> None:
        lower_this_threads_priority()
        while True:
            task = tasks.get()
            if task is None or stop.is_set():
                return
            self._wait_while_held(stop)
            try:
                self._do(task, stop)
            except Exception:  # one bad file or event must not end the index
                log.exception("workspace index: %s %s failed", *task)
            finally:
                with self._idle:
                    self._pending = max(0, self._pending - 1)
                    self._idle.notify_all()

    def _wait_while_held(self, stop: threading.Event) -> None:
        while not self._go.is_set() and not stop.is_set():
            since = self._held_since
            left = HOLD_MAX_S if since is None else since + HOLD_MAX_S - time.monotonic()
            if left <= 0:
                return  # held too long: go on (the hold stays, for nothing)
            self._go.wait(min(left, 0.1))  # stop() is seen within 0.1 s

    def _do(self, task: _Task, stop: threading.Event) -> None:
        kind, path = task
        if os.path.basename(path) in ("__init__.py", "__init__.pyi"):
            # a package appeared or went: its folder's modules are named anew when next read
            self._packages.pop(os.path.dirname(os.path.realpath(path)), None)
        if kind == "scan":
            self._scan(stop)
        elif os.path.basename(path) == ".gitignore" and kind in ("changed", "deleted"):
            for root, ignores in self._roots:
                at = root.relative(path)
                if at is not None:
                    ignores.forget(os.path.dirname(at))
            self._scan(stop)  # what it ignores changed: any file may come or go
        elif kind == "deleted":
            self._remove_under(path, stop)
        elif kind == "document":
            with self._lock:
                text = self._documents.pop(path, None)
            located = self._locate(path)
            if located is not None and text is not None:
                root, rel = located
                self._load(root, rel, text, len(text.encode("utf-8", "replace")), 0, stop)
        elif kind == "changed":
            located = self._locate(path)
            if located is None:
                return
            root, rel = located
            source = read_source(os.path.join(root.real, rel), self.limits.file_bytes)
            if source is None:  # gone, too large now, or no longer a regular file
                self._remove(os.path.join(root.real, rel), stop)
            else:
                self._load(root, rel, source.text, source.size, source.mtime_ns, stop)

    def _locate(self, path: str) -> tuple[Root, str] | None:
        """The root and relative path of a file the walk would read; None for one outside the
        workspace, under a link, ignored or skipped."""
        for root, ignores in self._roots:
            rel = root.relative(path)
            if rel is not None:
                return (root, rel) if ignores.admits(rel, self.skip_dirs) else None
        return None

    def _scan(self, stop: threading.Event) -> None:
        started = self.clock()
        seen: set[str] = set()
        self._capped = False
        self._packages = {}
        for root, ignores in self._roots:
            for found in walk(ignores, self.skip_dirs, self.limits.entries):
                self._wait_while_held(stop)
                if stop.is_set():
                    return
                if found is None:  # too many directory entries to look at
                    self._capped = True
                    break
                seen.add(found.path)
                held = self._files.get(found.path)
                if held is not None and (
                    held.mtime_ns == 0 or (held.size, held.mtime_ns) == (found.size, found.mtime_ns)
                ):
                    continue  # unchanged, or the editor's text (newer than the disk's)
                source = None
                if found.size <= self.limits.file_bytes:
                    source = read_source(found.path, self.limits.file_bytes)
                if source is None:  # grown past the cap, or unreadable: what was held goes
                    self._remove(found.path, stop)
                else:
                    self._load(root, found.rel, source.text, source.size, source.mtime_ns, stop)
                    time.sleep(0)  # let the event loop have the GIL between files
                if self._capped:
                    break
            if self._capped:
                break
        with self._lock:
            gone = [p for p, f in self._files.items() if p not in seen and f.mtime_ns != 0]
        for path in gone:
            self._remove(path, stop)
        with self._lock:
            if stop.is_set():
                return
            self._index_ms = round((self.clock() - started) * 1000)
            self._state = "capped" if self._capped else "ready"

    # --- what is held --------------------------------------------------------------------------
    def _load(
        self, root: Root, rel: str, text: str, size: int, mtime_ns: int, stop: threading.Event
    ) -> None:
        """Parse and keep a file's text (the thread of `stop`, which a restart has set when
        this thread's index is no longer the current one: then nothing changes)."""
        path = os.path.join(root.real, rel)
        language = language_of(path)
        if language is None or (language == "javascript" and is_minified(text)):
            return
        outline = python_outline(text, path) if language == "python" else js_outline(text, path)
        by_name = {d.name: d for d in outline.definitions}
        for d in outline.definitions:
            if d.default:
                by_name.setdefault("default", d)
        windows = windows_of(path, text)
        module = self._python_module(root, rel) if language == "python" else _js_module(rel)
        keys = python_module_keys(rel) if language == "python" else []
        nbytes = (
            outline.nbytes
            + OBJECT_BYTES
            + str_bytes(path) * 2  # the key and the record's own
            + str_bytes(rel)
            + str_bytes(module)
            + sys.getsizeof(by_name)
            + ENTRY_BYTES * (1 + len(keys))
            + sum(str_bytes(k) for k in keys)
            + sum(WINDOW_BYTES + 4 * len(w.words) for w in windows)  # the snippet store's
        )
        file = IndexedFile(path, rel, root, module, outline, by_name, size, mtime_ns, nbytes)
        with self._lock:
            if stop.is_set():
                return
            old = self._files.get(path)
            count = len(self._files) + (old is None)
            source_bytes = self._source_bytes + size - (old.size if old else 0)
            held_bytes = self._held_bytes + nbytes - (old.nbytes if old else 0)
            limits = self.limits
            if (
                count > limits.files
                or source_bytes > limits.total_bytes
                or held_bytes > limits.memory_bytes
            ):
                self._capped = True
                if self._state == "ready":
                    self._state = "capped"
                return
            if old is not None:
                self._drop(old)
            self._files[path] = file
            self._source_bytes += size
            self._held_bytes += nbytes
            self._definitions += len(outline.definitions)
            self._snippets.add(path, windows)
            for key in keys:
                self._modules.setdefault(key, []).append(path)

    def _remove(self, path: str, stop: threading.Event) -> None:
        with self._lock:
            old = None if stop.is_set() else self._files.get(path)
            if old is not None:
                self._drop(old)

    def _remove_under(self, path: str, stop: threading.Event) -> None:
        key = self._key(path) or path
        with self._lock:
            files = {} if stop.is_set() else self._files
            gone = [f for p, f in files.items() if p == key or p.startswith(key + os.sep)]
            for file in gone:
                self._drop(file)

    def _drop(self, file: IndexedFile) -> None:
        """Forget a file (the lock held)."""
        del self._files[file.path]
        self._source_bytes -= file.size
        self._held_bytes -= file.nbytes
        self._definitions -= len(file.outline.definitions)
        self._snippets.remove(file.path)
        if file.python:
            for key in python_module_keys(file.rel):
                paths = self._modules.get(key, [])
                if file.path in paths:
                    paths.remove(file.path)
                if not paths:
                    self._modules.pop(key, None)

    def _python_module(self, root: Root, rel: str) -> str:
        """The dotted name a Python file's package chain gives it: its directory and those
        above that hold an `__init__.py`, up to the first that does not (a `src/` folder, the
        root)."""
        parts = rel.rsplit(".", 1)[0].split("/")
        name = [] if parts[-1] == "__init__" else [parts[-1]]
        dirs = parts[:-1]
        while dirs and self._is_package(os.path.join(root.real, *dirs)):
            name.insert(0, dirs.pop())
        return ".".join(name)

    def _is_package(self, directory: str) -> bool:
        if directory not in self._packages:
            init = os.path.join(directory, "__init__.py")
            self._packages[directory] = os.path.lexists(init) or os.path.lexists(init + "i")
        return self._packages[directory]


def _js_module(rel: str) -> str:
    """A JS/TS file's module path: its path from the root without its suffix."""
    return rel[: -len(".d.ts")] if rel.endswith(".d.ts") else os.path.splitext(rel)[0]


def lower_this_threads_priority() -> None:
    """Give the calling thread INDEX_NICE (Linux only: elsewhere `setpriority` on a thread id
    is not per thread). Best effort: an index at the default priority still works."""
    if not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(INDEX_NICE, os.getpriority(os.PRIO_PROCESS, tid)))
    except OSError as exc:
        log.debug("workspace index: priority unchanged (%s)", exc)
