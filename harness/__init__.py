"""What the tests and the benchmarks both drive ghostfim with: an LSP client over a server
process, tiny GGUF models written on the spot, and the sample file the demos type into.

Neither tests/ nor bench/ ships in the wheel, and neither imports the other's support code:
both import this (tests of bench/ code import bench/ itself).
"""
