"""The kernel's word that a registry file may have changed (inotify), so that a process
asking every second does not look at every file every second (docs/design.md §4).

``RegistryStore.refresh`` asks ``ChangeNotice.quiet`` first. The notice is quiet when, since
the files were last looked at: the kernel reported nothing in the watched places, the
watches were in place before that look, the store still reads the same two directories,
and the look is less than ``LOOK_ANYWAY_SECONDS`` old. Anything else — an event, an
overflowed event queue, a watch that could not be added, inotify missing (not Linux, or
its limits reached), a process forked from the one that made the watches — means "look".
So a notice can only cause an extra look, never a missed change, except on a file system
whose changes the kernel does not see (a network file system changed from another host):
there a change is seen within ``LOOK_ANYWAY_SECONDS``.

What is watched, after each look that found a new listing or a change:

- every directory of the registry's listing, the overlay's directory and the parents of
  the two: entries added, removed or renamed (``ENTRY_EVENTS``; in a parent, a directory
  replaced whole, as a deploy swapping a symlink does). Writes in a directory are not
  watched, so a busy parent (one holding the SQLite file) does not make every second a look;
- each file fingerprinted, itself: written or touched (``WRITE_EVENTS``), removed or moved
  away; a symlink is followed, so a file kept elsewhere and linked in is watched where it is.

Reading the queue is one ``ioctl`` when nothing happened; the files are looked at only
after a change.
"""

import errno
import logging
import os

from inotify_simple import INotify, flags

logger = logging.getLogger(__name__)

#: How old a look may get while the kernel reports nothing, in seconds: the bound on
#: noticing a change the kernel cannot see (a network file system changed elsewhere).
LOOK_ANYWAY_SECONDS = 5.0

#: A watched entry's content or metadata changed.
WRITE_EVENTS = flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE
#: An entry appeared, went or was renamed, or the watched directory itself did.
SELF_EVENTS = flags.DELETE_SELF | flags.MOVE_SELF
ENTRY_EVENTS = flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO | SELF_EVENTS


class ChangeNotice:
    """Per process (a fork starts again): whether the registry's files can be taken as
    unchanged without looking at them. Not thread-safe: the store calls it under its lock."""

    def __init__(self) -> None:
        self._inotify: INotify | None = None
        self._pid: int | None = None
        self._watching: tuple[str, str] | None = None  # the (registry_dir, config_dir) watched
        self._descriptors: set[int] = set()
        self._looked_at = float("-inf")
        self._unavailable = False

    def quiet(self, directories: tuple[str, str], now: float) -> bool:
        """True when the files of ``directories`` (registry, config) need not be looked at at
        ``now`` (``time.monotonic()``): see the module's rules. Drains the kernel's queue."""
        if self._inotify is None or self._pid != os.getpid() or self._watching != directories:
            return False
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            self.close()
            return False
        return not events and now - self._looked_at < LOOK_ANYWAY_SECONDS

    def looked(self, directories: tuple[str, str], listing: list[str], files: list[str], now: float) -> None:
        """Record a look at ``now`` that listed the directories ``listing`` and fingerprinted
        ``files``, and watch them (again: a file replaced is a new inode). A watch new at this
        look may have missed a change made during it: the next ``quiet`` says "look" once more."""
        if self._unavailable:
            return
        if self._pid != os.getpid() or self._watching != directories:
            self.close()
        parents = sorted({os.path.dirname(os.path.abspath(d)) for d in directories})
        wanted = [(path, ENTRY_EVENTS) for path in (*listing, directories[1], *parents)]
        wanted += [(path, WRITE_EVENTS | SELF_EVENTS) for path in files if os.path.exists(path)]
        try:
            if self._inotify is None:
                self._inotify, self._pid, self._watching = INotify(), os.getpid(), directories
            descriptors = {self._inotify.add_watch(path, mask) for path, mask in wanted}
        except (OSError, AttributeError) as exc:
            # Not Linux (no inotify in its C library), a limit reached (fs.inotify.max_user_watches
            # or max_user_instances), a directory removed meanwhile: look every time.
            lasting = not isinstance(exc, OSError) or exc.errno in (errno.ENOSYS, errno.EMFILE, errno.ENOSPC)
            logger.warning("registry changes are looked for at every refresh in this process%s: %s",
                           "" if lasting else " until the next look", exc,
                           extra={"action": "registry_notice_unavailable"})
            self.close()
            self._unavailable = lasting
            return
        added = not descriptors <= self._descriptors
        self._descriptors |= descriptors
        self._looked_at = float("-inf") if added else now

    def close(self) -> None:
        """Drop the watches (a reset, a fork, other directories, an error). A forked process
        closes its own copy of the descriptor; its parent's watches are untouched."""
        if self._inotify is not None:
            self._inotify.close()
        self._inotify, self._pid, self._watching, self._descriptors = None, None, None, set()
        self._looked_at = float("-inf")
