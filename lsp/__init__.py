"""The LSP side of ghostfim: the server, the protocol's edge, documents, settings, and the
`ghostfim` program that runs it (lsp/main.py)."""

from ghostfim.engine.version import VERSION

__all__ = ["VERSION"]
