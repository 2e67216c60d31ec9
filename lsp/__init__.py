"""The LSP side of ghostfim: protocol, documents, settings, the server and the CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("ghostfim")
except PackageNotFoundError:  # run from a checkout that is not installed
    VERSION = "0.0.0+checkout"
