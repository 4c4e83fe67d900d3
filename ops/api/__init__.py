"""The approval API under ``/api/`` (docs/api.md): read proposals, runs and events; decide as a person."""
