"""Instants read from PostgreSQL at the driver's own speed (docs/performance.md).

Django's PostgreSQL backend reads every ``timestamptz`` through its own loader, a Python
subclass of psycopg's pure-Python one that then sets the connection's zone: about 5 µs
an instant, against 0.5 µs for psycopg's compiled loader. A tick burst reads two
instants per due loop and planning two per event (0.1 s in each 10,000-row figure).

``use_compiled_instant_loader`` (on ``connection_created``) puts ``UtcInstantLoader`` in
its place on a connection whose session time zone is UTC and whose Django zone is UTC —
always so under this runtime's settings (``TIME_ZONE = "UTC"``, ``USE_TZ``). The values
are the same: the compiled loader gives each instant in the session's zone, and Django's
gives it the zone it expects, UTC. Any other pairing keeps Django's loader. SQLite is
left alone.
"""

import functools
from datetime import UTC


def use_compiled_instant_loader(sender, connection, **kwargs) -> None:
    """The ``connection_created`` receiver (``runtime.apps``): see the module."""
    if connection.vendor != "postgresql" or connection.timezone is not UTC:
        return
    raw = connection.connection
    if raw.info.parameter_status("TimeZone") != "UTC":
        return
    raw.adapters.register_loader("timestamptz", _loader_class())


@functools.cache
def _loader_class() -> type:
    """``UtcInstantLoader``, made once (the driver is imported only on PostgreSQL)."""
    from psycopg.adapt import Loader
    from psycopg.types.datetime import TimestamptzLoader

    compiled = _compiled(TimestamptzLoader)

    class UtcInstantLoader(Loader):
        """psycopg's compiled ``timestamptz`` loader (a final class: wrapped, not subclassed);
        ``timezone`` tells Django's cursor check (``DatabaseWrapper.create_cursor``) that the
        zone is already the one it wants."""

        timezone = UTC

        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            self._load = compiled(oid, context).load

        def load(self, data):
            return self._load(data)

    return UtcInstantLoader


def _compiled(python_loader: type) -> type:
    """The compiled twin of psycopg's ``python_loader`` where psycopg[binary] is installed, else itself."""
    try:
        import psycopg_binary._psycopg as compiled
    except ImportError:
        return python_loader
    return getattr(compiled, python_loader.__name__, python_loader)
