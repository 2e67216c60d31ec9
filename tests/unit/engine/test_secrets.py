"""engine/secrets.py: backend URLs shown without their secrets, and the secrets collected for
the transport's last line of defence."""

from __future__ import annotations

import itertools

import pytest

from ghostfim.engine.secrets import (
    BackendUrlError,
    check_backend_url,
    cut,
    is_loopback,
    redact_url,
    secrets_of,
    sends_in_clear,
    url_secrets,
)

URL = "https://user:s3cr%40t@gpu-box:8443/v1?api_key=k3y-value&model=qwen&X-Amz-Signature=abcd"


def test_urls_are_shown_without_user_info_or_secret_parameters() -> None:
    assert (
        redact_url(URL) == "https://***@gpu-box:8443/v1?api_key=***&model=qwen&X-Amz-Signature=***"
    )
    assert redact_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    # No scheme: urlsplit would take `user` for one and show the rest as a path.
    assert redact_url("user:hunter22@gpu-box:9") == "***@gpu-box:9"
    assert redact_url("http://[bad") == "***"  # unparseable: nothing of it


def test_the_secrets_of_a_url_in_every_form_an_error_may_show() -> None:
    found = url_secrets(URL)
    assert {"s3cr%40t", "s3cr@t", "k3y-value", "abcd"} <= set(found)
    assert "qwen" not in found and "gpu-box" not in found
    assert url_secrets("https://a:b@h") == []  # too short to cut from text; redacted by shape
    assert all(len(a) >= len(b) for a, b in itertools.pairwise(found))  # longest first


def test_the_key_in_the_named_variable_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_TEST_KEY", "sk-live-0123")
    assert "sk-live-0123" in secrets_of(URL, "GHOSTFIM_TEST_KEY")
    assert secrets_of("", "") == []
    text = "refused: Bearer sk-live-0123 for https://user:s3cr@t@gpu-box"
    assert cut(text, secrets_of(URL, "GHOSTFIM_TEST_KEY")) == (
        "refused: Bearer *** for https://user:***@gpu-box"
    )


@pytest.mark.parametrize("url", ["gpu-box:8000", "user:pw@host", "localhost:8080/v1"])
def test_a_url_without_a_scheme_says_which_to_add(url: str) -> None:
    with pytest.raises(BackendUrlError, match=r"has no scheme: add https://"):
        check_backend_url(url)


def test_only_http_and_https_and_numeric_ports() -> None:
    assert check_backend_url(" https://h/v1 ") == "https://h/v1"
    assert check_backend_url("") == ""
    with pytest.raises(BackendUrlError, match="not supported"):
        check_backend_url("ftp://h")
    with pytest.raises(BackendUrlError):
        check_backend_url("http://h:port")


def test_what_counts_as_this_machine_and_as_sending_in_clear() -> None:
    assert all(map(is_loopback, ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"]))
    assert not any(map(is_loopback, ["example.com", "10.0.0.1", "", None]))
    assert sends_in_clear("http://gpu-box:8000", has_key=True)
    assert not sends_in_clear("http://gpu-box:8000", has_key=False)
    assert sends_in_clear("http://me:pass@gpu-box:8000", has_key=False)
    assert sends_in_clear("http://gpu-box:8000/?token=abcdef", has_key=False)
    assert not sends_in_clear("https://gpu-box:8000", has_key=True)
    assert not sends_in_clear("http://localhost:8000", has_key=True)
