"""Adapters: how a run's plan is executed (docs/design.md §8). ``ADAPTERS`` maps a plan's
``adapter`` to its function; ``runtime.adapters.base`` is the interface."""

from .agent import execute_agent
from .base import Adapter
from .builtin import execute_builtin
from .command import execute_command
from .fake import execute_fake

ADAPTERS: dict[str, Adapter] = {
    "command": execute_command,
    "agent": execute_agent,
    "fake": execute_fake,
    "builtin": execute_builtin,
}
