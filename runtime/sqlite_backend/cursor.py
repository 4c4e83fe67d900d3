"""The SQLite cursor with its placeholder conversion remembered per statement text.

Django writes SQL with ``%s`` placeholders and its SQLite cursor rewrites them to ``?``
with a regular expression on every ``execute``. A multi-row statement of the hot path
(``runtime.services.bulk_rows.insert_rows``, ``schedules.tick_rows``) carries thousands of
placeholders, and one rewrite of a 500-row insert took about 1 ms: a fifth of a planning
chunk's client time (docs/performance.md, "Planning"). Those statements repeat with the
same text chunk after chunk, so the rewritten text is kept for the last ``REMEMBERED``
statement texts; the rewrite itself is Django's.
"""

import functools

from django.db.backends.sqlite3.base import SQLiteCursorWrapper

#: Distinct statement texts whose rewrite is kept: a chunked path has a few sizes of each of
#: a few statements; at tens of kilobytes each this bounds the memory at a few megabytes.
REMEMBERED = 128


class RememberingCursor(SQLiteCursorWrapper):
    """``SQLiteCursorWrapper`` whose ``format`` → ``qmark`` rewrite is looked up, not redone."""

    def convert_query(self, query, *, param_names=None):
        if param_names is not None:
            return super().convert_query(query, param_names=param_names)
        return _qmark(query)


@functools.lru_cache(maxsize=REMEMBERED)
def _qmark(query: str) -> str:
    return SQLiteCursorWrapper.convert_query(None, query)
