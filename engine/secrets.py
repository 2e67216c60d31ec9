"""Secrets in backend URLs: shown redacted everywhere, collected for the last line of defence.

A backend URL may carry credentials (`https://user:secret@host/v1`) or a key in its query
(`?api_key=secret`), and the key of `backendApiKeyEnv` goes in a header. Whatever shows a
backend (labels, `$/progress`, messages, `ghostfim/status`, logs, GHOSTFIM_TRACE) shows it
through `redact_url`; and the LSP transport and the trace file cut every value `secrets_of`
returns out of what they write, for text we do not build ourselves (a server's error body
that echoes the request, an exception's message).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit, urlunsplit

from ghostfim.engine import env

REDACTED = "***"
# Query parameters whose value is a credential (api_key, access_token, X-Amz-Signature, ...).
SECRET_PARAMETER = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.I)
# A value this short would match ordinary text when cut from messages; URL credentials and
# keys are longer, and their URL form is redacted by structure whatever their length.
MIN_CUT_LENGTH = 4
ALLOWED_SCHEMES = ("http", "https")


class BackendUrlError(ValueError):
    """A backend URL ghostfim will not use; the message says what to write instead."""


def redact_url(url: str) -> str:
    """`url` with its user info and secret-named query values replaced by `***`."""
    try:
        parts = _split(url)
    except ValueError:
        return REDACTED  # unparseable: nothing of it is shown
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={REDACTED if SECRET_PARAMETER.search(name) else quote(value, safe='')}"
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    shown = urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    return shown if "://" in url else shown.removeprefix("//")


def _split(url: str) -> SplitResult:
    """urlsplit, reading a URL without a scheme as `host[:port]/path`: urlsplit itself would
    read `user:secret@host` as the scheme `user` and a path, and nothing would be redacted."""
    return urlsplit(url if "://" in url else "//" + url)


def url_secrets(url: str) -> list[str]:
    """The secret values in `url`: its password and secret-named query values, each both as
    written and decoded (an error message may show either)."""
    try:
        parts = _split(url)
    except ValueError:
        return [url] if len(url) >= MIN_CUT_LENGTH else []
    values: list[str] = []
    if parts.password:
        values.append(parts.password)
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        values.append(userinfo.partition(":")[2] or userinfo)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if SECRET_PARAMETER.search(name):
            values.append(value)
    found = {form for value in values for form in (value, unquote(value), quote(value, safe=""))}
    return sorted((v for v in found if len(v) >= MIN_CUT_LENGTH), key=len, reverse=True)


def secrets_of(backend_url: str, api_key_env: str) -> list[str]:
    """Every secret a backend's settings point at: the URL's, and the key in the variable."""
    found = url_secrets(backend_url) if backend_url else []
    key = env.secret(api_key_env) if api_key_env else ""
    if len(key) >= MIN_CUT_LENGTH:
        found.append(key)
    return sorted(set(found), key=len, reverse=True)


def cut(text: str, secrets: Iterable[str]) -> str:
    """`text` with every one of `secrets` replaced by `***` (longest first)."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def check_backend_url(url: str) -> str:
    """A backend URL as given, or BackendUrlError when it has no http(s) scheme.

    A URL without a scheme used to become `http://...` silently, which sent the key in clear
    to a host the user meant to reach over TLS; now the user says which one.
    """
    text = url.strip()
    if not text:
        return text
    scheme, sep, _ = text.partition("://")
    if not sep:
        raise BackendUrlError(
            f"{redact_url(text)} has no scheme: add https:// (or http:// for a server on "
            "this machine or your own network)"
        )
    if scheme.lower() not in ALLOWED_SCHEMES:
        raise BackendUrlError(f"scheme {scheme}:// is not supported; use https:// or http://")
    try:
        urlsplit(text).port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise BackendUrlError(f"{redact_url(text)}: {exc}") from None
    return text


def is_loopback(host: str | None) -> bool:
    """Whether `host` is this machine (localhost, 127.0.0.0/8, ::1)."""
    if not host:
        return False
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower().endswith(".localhost")


def sends_in_clear(url: str, has_key: bool) -> bool:
    """Whether a request to `url` would carry a credential over plain HTTP off this machine."""
    parts = urlsplit(url)
    carries = has_key or "@" in parts.netloc or bool(url_secrets(url))
    return carries and parts.scheme.lower() == "http" and not is_loopback(parts.hostname)
