"""What every ``raymod`` subcommand reports errors with: one line, an exit status."""
from __future__ import annotations

import argparse

__all__ = ["CLIError", "ArgumentParser", "one_line"]


class CLIError(Exception):
    """A problem to report as one line on stderr, with an exit status (1 by default)."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class ArgumentParser(argparse.ArgumentParser):
    """Errors are one line, ``raymod <cmd>: error: ... (see --help)``, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")



def one_line(err: BaseException) -> str:
    """``err`` as a single line (its type name when it has no message)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__
