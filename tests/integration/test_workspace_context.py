"""The workspace in the prompt (issue 31), through the server: the index is built from the
workspace the editor opened, requests get the definitions their code uses (in the status and
the request's figures), `workspaceContext: "off"` stops it, file changes reach it, and the
client is asked to watch files when it can be."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import TINY, complete, configure, open_doc, start, status, wait_for

NET = '''\
def connect(url: str, *, retries: int = 3) -> "Handle":
    """Open a handle to url."""


class Handle:
    def send(self, data: bytes) -> int: ...
'''
APP = """\
from net import connect


def main():
    handle = connect("https://example.org")
    handle.
"""
EXTRA = """\
from net import connect


def ping():
    handle = connect("https://example.org/ping")
    handle.send(b"ping")
"""
WATCHING = {"didChangeWatchedFiles": {"dynamicRegistration": True}}


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def ready(s: dict[str, Any]) -> bool:
    return (s.get("workspace") or {}).get("state") == "ready"


async def test_a_request_gets_the_definitions_its_code_uses(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    client = await start(
        {**TINY, "workspaceContext": "auto"}, root=root, workspace_capabilities=WATCHING
    )
    try:
        indexed = await wait_for(client, ready, timeout=20)
        assert indexed["workspace"]["files"] == 2 and indexed["workspace"]["definitions"] >= 2
        assert indexed["memory"]["caches"]["workspaceIndex"]["bytes"] > 0
        # The client was asked to watch the source files (it can register dynamically).
        assert "client/registerCapability" in client.server_requests

        uri = (root / "app.py").as_uri()
        await open_doc(client, uri, APP)
        await complete(client, uri, 5, 11, trigger=1)
        s = await status(client)
        assert [d["name"] for d in s["workspace"]["lastRequest"]] == ["connect"]
        last = s["recent"][-1]
        assert last["definitions"] == ["connect"] and last["definitionTokens"] > 10

        # A new file on disk, reported by the editor, is indexed: code written like app.py's,
        # which the next request at a pause takes as a snippet (the definitions stay).
        (root / "extra.py").write_text(EXTRA)
        await client.notify(
            "workspace/didChangeWatchedFiles",
            {"changes": [{"uri": (root / "extra.py").as_uri(), "type": 1}]},
        )
        await wait_for(client, lambda s: s["workspace"]["files"] == 3, timeout=20)
        other = (root / "main.py").as_uri()
        await open_doc(client, other, APP.replace("main", "run"))
        await complete(client, other, 5, 11, trigger=1)
        s = await status(client)
        assert {"snippet": "extra.py:1", "file": "extra.py"} in s["workspace"]["lastRequest"]
        last = s["recent"][-1]
        assert "extra.py:1" in last["definitions"], last["definitions"]

        # Off: the index goes, and requests get nothing from it.
        await configure(client, {**TINY, "workspaceContext": "off"})
        await wait_for(client, lambda s: s["workspace"]["state"] == "off", timeout=20)
        await complete(client, uri, 5, 11, trigger=1)
        s = await status(client)
        assert s["recent"][-1]["definitions"] == [] and s["recent"][-1]["definitionTokens"] == 0
    finally:
        assert await client.stop() == 0


async def test_without_a_workspace_folder_nothing_is_indexed(tmp_path: Path) -> None:
    client = await start({**TINY, "workspaceContext": "auto"})
    try:
        await asyncio.sleep(0.5)
        s = await status(client)
        assert s["workspace"]["state"] == "off" and s["workspace"]["files"] == 0
        uri = (workspace(tmp_path) / "app.py").as_uri()
        await open_doc(client, uri, APP)
        await complete(client, uri, 5, 11, trigger=1)
        assert (await status(client))["recent"][-1]["definitions"] == []
    finally:
        assert await client.stop() == 0


CODEC = '''\
class Codec:
    """Turns records into wire frames and back."""

    def zq_frame_of_record(self, record: dict) -> bytes: ...

    def zq_record_of_frame(self, frame: bytes) -> dict: ...
'''
SENDER = """\
from codec import Codec


def send(record):
    frame = Codec.
"""
SMALL = {"model": {"size": "small"}, "maxTokens": 16, "backend": "local", "nGpuLayers": -1}


async def guided_then_not(
    root: Path, files: dict[str, str], typed_in: str, line: int, col: int, names: tuple[str, ...]
) -> None:
    """Write `files` into `root`, ask for a suggestion at (line, col) of `typed_in` with the
    context on: it starts with one of `names`; with the context off: none does."""
    for name, text in files.items():
        (root / name).write_text(text)
    uri = (root / typed_in).as_uri()
    client = await start({**SMALL, "workspaceContext": "auto"}, root=root)
    try:
        await wait_for(client, ready, timeout=20)
        await open_doc(client, uri, files[typed_in])
        answer = await complete(client, uri, line, col, trigger=1)
        [item] = answer["items"]
        assert item["insertText"].startswith(names), item["insertText"]

        await configure(client, {**SMALL, "workspaceContext": "off"})
        await wait_for(client, lambda s: s["workspace"]["state"] == "off", timeout=20)
        answer = await complete(client, uri, line, col, trigger=1)
        texts = [i["insertText"] for i in answer["items"]]
        assert not any(t.startswith(names) for t in texts), texts
    finally:
        assert await client.stop() == 0


@pytest.mark.model
async def test_after_a_dot_the_real_model_writes_a_name_the_class_has(tmp_path: Path) -> None:
    """The member guide (engine/context/guide.py) through the server, with the real model on
    names it cannot guess: with the context off it writes a name of its own."""
    files = {"codec.py": CODEC, "sender.py": SENDER}
    members = ("zq_frame_of_record", "zq_record_of_frame")
    await guided_then_not(tmp_path, files, "sender.py", 4, 18, members)


BASE = '''\
class Channel:
    """A connection that queues frames until it is flushed."""

    def __init__(self) -> None:
        self.pending_zq_frames: list[bytes] = []
'''
RELAY = """\
from base import Channel


class Relay(Channel):
    def __len__(self) -> int:
        return len(self.
"""


@pytest.mark.model
async def test_after_self_the_real_model_writes_a_name_the_instance_has(tmp_path: Path) -> None:
    """`self.` in a method: the names of an instance of the class around it, its base's
    attribute among them (assigned in another file, so no prompt line shows it)."""
    files = {"base.py": BASE, "relay.py": RELAY}
    await guided_then_not(tmp_path, files, "relay.py", 5, 24, ("pending_zq_frames",))


STORE_TS = """\
export class Store {
  protected pendingZqFrames: Uint8Array[] = []
}
"""
RELAY_TS = """\
import { Store } from './store'

export class Relay extends Store {
  count(): number {
    return this.
"""


@pytest.mark.model
async def test_after_this_the_real_model_writes_a_name_the_instance_has(tmp_path: Path) -> None:
    """`this.` in a TypeScript method: the base's field, declared in another file."""
    files = {"store.ts": STORE_TS, "relay.ts": RELAY_TS}
    await guided_then_not(tmp_path, files, "relay.ts", 4, 16, ("pendingZqFrames",))


LEDGER = '''\
class Ledger:
    """What a customer owes."""

    def __init__(self) -> None:
        self.zq_settled_cents = 0
        self.zq_pending_cents = 0
'''
REPORT = """\
from ledger import Ledger


def overdue(ledger: Ledger) -> int:
    return ledger.
"""


@pytest.mark.model
async def test_after_a_typed_parameter_the_real_model_writes_a_name_of_its_class(
    tmp_path: Path,
) -> None:
    """A parameter annotated with a workspace class goes on with an instance's names (here
    assigned in `__init__`, which the class's stub in the prompt does not show)."""
    files = {"ledger.py": LEDGER, "report.py": REPORT}
    names = ("zq_settled_cents", "zq_pending_cents")
    await guided_then_not(tmp_path, files, "report.py", 4, 18, names)


STORE = '''\
def zq_open_bucket_store(path: str, *, mode: str = "r") -> "BucketStore":
    """Open the bucket store at path."""
'''
ORDERS = """\
from store import zq_open_bucket_store


def load_orders(path):
    store = zq_open_bucket_store(path, mode="rb+")
    return store.read_all("orders")
"""
# The cursor goes at the end: the new line's indentation.
INVOICES = "from store import zq_open_bucket_store\n\n\ndef load_invoices(path):\n    \n"


@pytest.mark.model
async def test_a_documents_first_ghost_text_has_the_workspace_block(tmp_path: Path) -> None:
    """The first automatic request in a document, at a line's start (the suggestion a user
    reads at the dwell after opening the file), has the workspace's block in its prompt on
    this CPU too: the real model takes the call's arguments from the similar code in another
    file (`mode="rb+"`, which nothing in this file shows). Off, it does not."""
    for name, text in {"store.py": STORE, "orders.py": ORDERS, "invoices.py": INVOICES}.items():
        (tmp_path / name).write_text(text)
    settings = {**SMALL, "filter": "off"}  # the whole suggestion, not its sure part
    client = await start({**settings, "workspaceContext": "auto"}, root=tmp_path)
    try:
        await wait_for(client, ready, timeout=20)
        uri = (tmp_path / "invoices.py").as_uri()
        await open_doc(client, uri, INVOICES)
        await complete(client, uri, 4, 4, trigger=2)  # answered at its first visible text
        last = (await wait_for(client, lambda s: bool(s["recent"]), timeout=20))["recent"][-1]
        assert "orders.py:1" in last["definitions"] and last["definitionTokens"] > 10, last
        answer = await complete(client, uri, 4, 4, trigger=2)  # the whole of it, cached
        [item] = answer["items"]
        assert 'zq_open_bucket_store(path, mode="rb+")' in item["insertText"], item

        await configure(client, {**settings, "workspaceContext": "off"})
        await wait_for(client, lambda s: s["workspace"]["state"] == "off", timeout=20)
        other = (tmp_path / "bills.py").as_uri()
        await open_doc(client, other, INVOICES.replace("invoices", "bills"))
        await complete(client, other, 4, 4, trigger=2)
        after = await wait_for(client, lambda s: len(s["recent"]) >= 2, timeout=20)
        assert after["recent"][-1]["definitionTokens"] == 0
        answer = await complete(client, other, 4, 4, trigger=2)
        texts = [i["insertText"] for i in answer["items"]]
        assert not any('mode="rb+"' in t for t in texts), texts
    finally:
        assert await client.stop() == 0
