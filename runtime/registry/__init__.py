"""The registry: kernel files, overlay, validation, digest (DESIGN §4)."""

from lib.cadence import CadenceError, parse_every

from .loader import load_registry
from .model import (
    TICK_BOOKKEEPING_FIELDS,
    Definition,
    Edge,
    EventType,
    Job,
    Keyed,
    KeyedSetter,
    Loop,
    Registry,
    RegistryError,
    RegistryInvalid,
    Repo,
)
from .store import get_registry, store

__all__ = [
    "TICK_BOOKKEEPING_FIELDS",
    "CadenceError",
    "Definition",
    "Edge",
    "EventType",
    "Job",
    "Keyed",
    "KeyedSetter",
    "Loop",
    "Registry",
    "RegistryError",
    "RegistryInvalid",
    "Repo",
    "get_registry",
    "load_registry",
    "parse_every",
    "store",
]
