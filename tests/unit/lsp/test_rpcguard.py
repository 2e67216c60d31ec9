"""lsp/rpcguard.py: the JSON-RPC edge's pieces: the id of a broken message, positions of a
didChange clamped to what the protocol's types take. (The server answering hostile input is
tests/integration/test_reliability.py's.)"""

from __future__ import annotations

import json

import pytest

from ghostfim.engine.config import EngineConfig
from ghostfim.lsp.redaction import RedactingWriter, json_forms, settings_secrets
from ghostfim.lsp.rpcguard import (
    UINTEGER_MAX,
    Rejected,
    _clamp_positions,
    _short,
    top_level_id,
)


def test_top_level_id_is_found_only_at_depth_one() -> None:
    assert top_level_id('{"jsonrpc":"2.0","id":7,"method":"x","params":{') == 7
    assert top_level_id('{"method":"m","id":"a\\"b",') == 'a"b'
    assert top_level_id('{"method":"$/cancelRequest","params":{"id":5}') is None
    assert top_level_id('{"params":{"id":5},"id":6') == 6
    assert top_level_id('{"id":-3,') == -3
    assert top_level_id('{"id":null}') is None
    assert top_level_id("garbage") is None


def test_a_fractional_id_is_no_id() -> None:
    assert top_level_id('{"jsonrpc":"2.0","id":1.5,"method":"x"') is None


def test_out_of_range_positions_in_a_did_change_are_clamped() -> None:
    params = {
        "textDocument": {"uri": "file:///a", "version": 2},
        "contentChanges": [
            {
                "range": {
                    "start": {"line": -4, "character": 17},
                    "end": {"line": 2**40, "character": 3},
                },
                "text": "x",
            }
        ],
    }
    clamped, changed = _clamp_positions(params)
    r = clamped["contentChanges"][0]["range"]
    assert changed
    assert r["start"] == {"line": 0, "character": 0}  # before the first line: the start
    assert r["end"] == {"line": UINTEGER_MAX, "character": 3}
    assert clamped["textDocument"] == params["textDocument"] and clamped is not params
    same, changed = _clamp_positions({"line": 1, "character": 2, "flag": True})
    assert same == {"line": 1, "character": 2, "flag": True} and not changed


def test_what_is_quoted_back_is_short() -> None:
    assert _short("x" * 500).endswith("…") and len(_short("x" * 500)) == 121
    assert _short({"a": 1}) == "{'a': 1}"
    rejected = Rejected({"id": 3}, "no jsonrpc")
    assert rejected.jsonrpc != "2.0" and rejected.reason == "no jsonrpc"


def test_the_transport_cuts_the_backends_secrets_in_their_json_forms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GHOSTFIM_TEST_KEY", "sk-0123456789")
    settings = EngineConfig(
        backend_url='https://me:pa"ss\\wörd@h/v1?token=tok-abcdef',
        backend_api_key_env="GHOSTFIM_TEST_KEY",
    )
    written: list[bytes] = []

    class Out:
        def write(self, data: bytes) -> None:
            written.append(data)

    writer = RedactingWriter(Out(), lambda: json_forms(settings_secrets(settings)))
    message = json.dumps(
        {"message": 'pa"ss\\wörd, tok-abcdef, Bearer sk-0123456789', "raw": 'pa"ss\\wörd'},
        ensure_ascii=False,
    ).encode()
    writer.write(b"Content-Length: %d\r\n\r\n" % len(message) + message)
    head, _, body = written[0].partition(b"\r\n\r\n")
    assert head == b"Content-Length: %d" % len(body)
    text = json.loads(body)
    assert text == {"message": "[redacted], [redacted], Bearer [redacted]", "raw": "[redacted]"}
