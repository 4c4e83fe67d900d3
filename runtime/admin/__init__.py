"""The operator inbox in the Django admin (docs/design.md §10).

Pending proposals come first; a proposal is decided from the list's actions or from its
own page, always through a confirmation that says in words what will run
(``runtime.plan_text``). Interrupted runs come first among runs, with retry and close.
Events, runs and the journal are machine-owned: read-only here apart from those
decisions. A proposal's and a run's page show their journal entries.
"""

from . import proposals, records, runs  # noqa: F401  (each registers its admin)
