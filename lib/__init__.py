"""Plain Python the runtime is built on: no Django models, no settings (docs/design.md §1).

Time formatting and parsing, slot and calendar arithmetic, JSON Pointer, strict JSON and
YAML, HMAC signing, process groups and signals, the event envelope, the refusal base class.
"""
