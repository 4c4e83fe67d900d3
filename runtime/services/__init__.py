"""Every transition across the runtime's tables, each in its own transaction (docs/design.md §1, §3, §7, §8, §9)."""
