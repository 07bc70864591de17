"""The command-line face of a report writer: bad input exits with its message, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["run_writer"]


def run_writer(write: Callable[..., Any], **kwargs: Any) -> int:
    """Calls ``write(**kwargs)`` for a ``python -m labeldp.report.<module>`` command.

    Returns:
      0 when it wrote its outputs.

    Raises:
      SystemExit: the input was missing or wrong (``OSError`` / ``ValueError``), with the writer's
        message, which names the problem and the fix; nothing half-written is left (writers write
        through a temporary name).
    """
    try:
        write(**kwargs)
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    return 0
