"""Nothing the server writes carries a backend's secrets (docs/reliability.md, "Threat model").

Backends are shown through engine/secrets.py's `redact_url` everywhere; this is the last line of
defence for text ghostfim does not build itself (a remote server's error page echoing the
request's headers, an exception's message): the transport cuts the secrets the settings point
at out of every message it sends, and the trace file's records out of every line.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from ghostfim.engine.secrets import cut, secrets_of


def settings_secrets(settings: Any) -> list[str]:
    """The secrets a server's settings point at (engine/secrets.py secrets_of)."""
    url = getattr(settings, "backend_url", "")
    name = getattr(settings, "backend_api_key_env", "")
    return secrets_of(url if isinstance(url, str) else "", name if isinstance(name, str) else "")


def json_forms(secrets: list[str]) -> list[bytes]:
    """Each secret as bytes, raw and as a JSON string body (ASCII-escaped or not)."""
    forms = {
        form.encode()
        for secret in secrets
        for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])
    }
    return sorted(forms, key=len, reverse=True)


class RedactingWriter:
    """The transport, with the backend's API key cut out of everything we send.

    Defence in depth: a remote server's error body may echo the request's headers (proxies
    do), and such text reaches messages and logs. One message per write (header and body):
    the Content-Length is recomputed when anything is cut.
    """

    def __init__(self, writer: Any, secrets: Callable[[], list[bytes]]) -> None:
        self._writer = writer
        self._secrets = secrets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)

    def close(self) -> Any:
        return self._writer.close()

    def write(self, data: bytes) -> Any:
        secrets = self._secrets()
        if secrets and any(secret in data for secret in secrets):
            head, sep, body = data.partition(b"\r\n\r\n")
            if not sep:
                head, body = b"", head
            for secret in secrets:
                body = body.replace(secret, b"[redacted]")
            if sep:
                head = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % len(body), head)
            data = head + sep + body
        return self._writer.write(data)


class SecretsCut(logging.Filter):
    """Cuts the backend's secrets out of log records written outside the LSP stream (the
    trace file); what goes to the client is cut by the transport (lsp/rpcguard.py)."""

    def __init__(self, secrets: Callable[[], list[str]]) -> None:
        super().__init__()
        self._secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets()
        if secrets:
            text = record.getMessage()
            if record.exc_info:  # a traceback's messages may hold the URL too
                text += "\n" + logging.Formatter().formatException(record.exc_info)
                record.exc_info, record.exc_text = None, None
            record.msg, record.args = cut(text, secrets), None
        return True
