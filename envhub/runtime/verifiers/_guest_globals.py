"""The names the sandbox puts in a guest's namespace before running it (see
``envhub.sandbox._launcher.run``), declared for type checkers.

The code-tests guests (``_guest_candidate.py``, ``_guest_tests.py``) import them under
``if TYPE_CHECKING:`` only: at run time the names come from the namespace the guest runs in,
and nothing imports this module (its names are declared, never given values).
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

__all__ = ["CHANNEL", "INPUT", "WORKSPACE", "Channel"]


class Channel(Protocol):
    """``envhub.sandbox._launcher._Channel``, as a guest uses it."""

    _stdin: Any  # the file ``receive`` reads lines from; the candidate guest replaces it

    def report(self, **fields: Any) -> None:
        """Send one JSON line to the caller."""

    def receive(self) -> Any:
        """The next JSON line on stdin, decoded, or None at its end."""

    def out_of_memory(self) -> NoReturn:
        """Report that memory ran out and end the process."""


#: The guest's input: the JSON object the verifier sent.
INPUT: dict[str, Any]
#: Lines out to the caller and in from it.
CHANNEL: Channel
#: The directory the guest runs in.
WORKSPACE: str
