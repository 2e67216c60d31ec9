"""Files that change on disk outside the editor's buffers (a `git checkout`, a generator, another
tool): the workspace index (engine/service/workspace.py) hears of them here.

Where the client can register `workspace/didChangeWatchedFiles` dynamically (VS Code; Neovim
0.10+ where it has a file watcher), the server asks it to watch the source files it indexes and
the `.gitignore` files. Otherwise the index walks the workspace again now and then
(RESCAN_S): it reads only files whose size or time changed. Saved documents reach it either way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from lsprotocol import types

log = logging.getLogger("ghostfim.watching")

RESCAN_S = 120.0
REGISTRATION_ID = "ghostfim-workspace-files"
GLOBS = (
    "**/*.{py,pyi}",
    "**/*.{js,jsx,mjs,cjs,ts,tsx,mts,cts}",
    "**/.gitignore",
)


class Watcher(Protocol):
    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    async def ask_client(self, method: str, params: Any) -> Any: ...
    def rescan_workspace(self) -> None: ...


def can_register(caps: types.ClientCapabilities | None) -> bool:
    watched = caps.workspace.did_change_watched_files if caps and caps.workspace else None
    return bool(watched and watched.dynamic_registration)


async def watch_workspace_files(server: Watcher) -> None:
    """Ask the client to watch the workspace's source files, or rescan now and then."""
    if can_register(server.client_capabilities):
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=g) for g in GLOBS]
        )
        registration = types.Registration(
            id=REGISTRATION_ID,
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=options,
        )
        try:
            await server.ask_client(
                types.CLIENT_REGISTER_CAPABILITY, types.RegistrationParams([registration])
            )
            return
        except Exception as exc:  # a refusal or no answer: fall back to rescans
            log.info("file watching not registered (%s); rescanning every %.0f s", exc, RESCAN_S)
    while True:
        await asyncio.sleep(RESCAN_S)
        server.rescan_workspace()


def file_changes(params: types.DidChangeWatchedFilesParams) -> list[tuple[str, bool]]:
    """(URI, deleted) of each change the client reports."""
    return [(c.uri, c.type == types.FileChangeType.Deleted) for c in params.changes]
