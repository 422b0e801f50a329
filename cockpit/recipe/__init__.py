"""The R37 procedure as code, without UI: parsers of host tool output, preflight checks, setup, launch."""
