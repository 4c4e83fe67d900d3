"""A registry's loop names in the orders the pages and the doctor need, sorted once per registry
in force (docs/schedules.md, "Performance"): at 100,000 loops a page is a slice of them, never a
sort or a walk of every loop."""

from dataclasses import dataclass

from runtime.registry import Registry


@dataclass(frozen=True)
class LoopIndex:
    """A registry's loop names, each tuple by name: every loop, the enabled and the disabled
    ones, and the enabled keyed ones."""

    names: tuple[str, ...]
    enabled: tuple[str, ...]
    disabled: tuple[str, ...]
    keyed: tuple[str, ...]


_indexes: dict[str, tuple[Registry, LoopIndex]] = {}


def loop_index(registry: Registry) -> LoopIndex:
    """The ``LoopIndex`` of ``registry``, sorted once for the registry in force (a new
    registry, after a reload, is sorted again)."""
    cached = _indexes.get("registry")
    if cached is not None and cached[0] is registry:
        return cached[1]
    names = tuple(sorted(registry.loops))
    loops = registry.loops
    index = LoopIndex(
        names=names,
        enabled=tuple(name for name in names if loops[name].enabled),
        disabled=tuple(name for name in names if not loops[name].enabled),
        keyed=tuple(name for name in names if loops[name].enabled and loops[name].keyed is not None),
    )
    _indexes["registry"] = (registry, index)
    return index
