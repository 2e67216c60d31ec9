"""lsp/server.py: the thin handlers' helpers (the server over stdio is
tests/integration/test_lsp.py's)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from ghostfim.lsp.server import (
    ACCEPTED_COMMAND,
    LspLogHandler,
    _drop_stale_cancels,
    _field,
    _item_id_of,
    build_server,
)


def test_an_accept_signal_names_its_item_either_way() -> None:
    item = {"insertText": "x", "command": {"command": ACCEPTED_COMMAND, "arguments": ["g7"]}}
    assert _item_id_of("g7") == "g7" and _item_id_of(item) == "g7"
    as_object = SimpleNamespace(command=SimpleNamespace(arguments=["g8"]))  # as pygls hands it
    assert _item_id_of(as_object) == "g8"
    for nothing in ("", None, {}, {"command": {"arguments": []}}, {"command": {"arguments": [5]}}):
        assert _item_id_of(nothing) is None
    assert _field({"a": 1}, "a") == 1 and _field(SimpleNamespace(a=2), "a") == 2
    assert _field(None, "a") is None


def test_the_log_goes_nowhere_before_initialize_and_stale_cancels_are_quiet() -> None:
    server = build_server()
    handler = LspLogHandler(server)
    handler.emit(logging.LogRecord("ghostfim", logging.WARNING, "", 0, "early", None, None))
    assert handler.loop is None  # no one to tell, and no failure either
    stale = logging.LogRecord("x", logging.WARNING, "", 0, "Cancel notification for unknown "
                              "message id 7", None, None)  # fmt: skip
    other = logging.LogRecord("x", logging.WARNING, "", 0, "something else", None, None)
    assert not _drop_stale_cancels(stale) and _drop_stale_cancels(other)
    assert server.service.host.backend is None  # nothing loads before initialized
