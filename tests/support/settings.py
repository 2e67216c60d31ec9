"""Settings in the client's shape: the inverse of lsp/settings.py's parse_settings.

Only tests need it (a round trip proves every field has a key, and that what a client writes
parses back to the same settings), so it lives here and not in the server.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ghostfim.lsp.settings import AUTO_FIELDS, KEYS, Settings


def settings_to_client(settings: Settings) -> dict[str, Any]:
    """The settings as a client writes them (camelCase, `model` nested, "auto" for None)."""
    out: dict[str, Any] = {}
    by_field = {name: key for key, (name, _) in KEYS.items()}
    for f in fields(settings):
        key = by_field.get(f.name)
        if key is None:
            continue
        value = getattr(settings, f.name)
        if f.name in AUTO_FIELDS and value is None:
            value = "auto"
        if key.startswith("model."):
            out.setdefault("model", {})[key.split(".", 1)[1]] = value
        else:
            out[key] = value
    return out
