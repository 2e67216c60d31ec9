"""ghostfim's version: the installed package's, or a checkout's placeholder."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("ghostfim")
except PackageNotFoundError:  # run from a checkout that is not installed
    VERSION = "0.0.0+checkout"
