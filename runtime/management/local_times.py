"""``--local [ZONE]`` of the commands a person reads (docs/design.md §10): their text shows every
instant in the host's zone (``TZ``) or in ``ZONE``, with its offset; ``--json`` and the default
stay RFC 3339 UTC, which scripts read."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.management.base import CommandError

from lib.instants import localize_text
from lib.text_table import cells_shown_as

#: ``--local`` given without a zone: the host's.
HOST = ""
#: The environment variable holding ``TZ`` as it was before Django set it to ``TIME_ZONE`` (manage.py).
HOST_TZ_VARIABLE = "FACTORY_HOST_TZ"
#: The host's zone when ``TZ`` was not set.
LOCALTIME = Path("/etc/localtime")


def host_zone() -> tzinfo:
    """The zone of the person running the command: ``TZ`` as they set it (``HOST_TZ_VARIABLE``),
    else the host's ``/etc/localtime``, else UTC. Raises ``CommandError`` (exit 2) for a ``TZ``
    that is not an IANA name this host knows."""
    name = os.environ.get(HOST_TZ_VARIABLE, "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise CommandError(f"--local: TZ={name!r} is not a time zone this host knows (an IANA name: "
                               "Europe/Budapest); name one: --local ZONE", returncode=2) from None
    try:
        with LOCALTIME.open("rb") as data:
            return ZoneInfo.from_file(data, key="localtime")
    except (OSError, ValueError):
        return UTC


def add_local_argument(parser, default=None) -> None:
    """Add ``--local [ZONE]`` to ``parser`` (a subcommand's parser passes ``argparse.SUPPRESS``,
    so that the option may come before or after the subcommand)."""
    parser.add_argument(
        "--local", nargs="?", const=HOST, default=default, metavar="ZONE",
        help="show times in this IANA zone (Europe/Budapest), or without ZONE in the host's (TZ); --json stays UTC",
    )


class LocalTimes:
    """A command's ``stdout`` that writes every UTC instant in ``zone`` (None: the host's)."""

    def __init__(self, out, zone):
        self.out, self.zone = out, zone

    def write(self, msg="", *args, **kwargs):
        self.out.write(localize_text(msg, self.zone), *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.out, name)


@contextmanager
def localized_output(command, options: dict) -> Iterator[None]:
    """Within the block, when ``--local`` was given (and not ``--json``), ``command.stdout`` is a
    ``LocalTimes`` and every table's cells are shown in the zone before they are measured (its
    columns stay aligned). Raises ``CommandError`` (exit 2) for a zone this host does not know,
    with ``--json`` too."""
    wanted = options.get("local")
    if wanted is None:
        yield
        return
    try:
        zone = ZoneInfo(wanted) if wanted else host_zone()
    except (ZoneInfoNotFoundError, ValueError):
        raise CommandError(f"--local {wanted!r}: not a time zone this host knows (an IANA name: Europe/Budapest)",
                           returncode=2) from None
    if options.get("json"):  # JSON keeps UTC instants; the zone was still checked
        yield
        return
    plain, command.stdout = command.stdout, LocalTimes(command.stdout, zone)
    try:
        with cells_shown_as(lambda cell: localize_text(cell, zone)):
            yield
    finally:
        command.stdout = plain
