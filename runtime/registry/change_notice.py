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

What is watched, renewed at each look (a file replaced is a new inode):

- every directory of the registry's listing, the overlay's directory and the parents of
  the two: entries added, removed or renamed (``ENTRY_EVENTS``; in a parent, a directory
  replaced whole, as a deploy swapping a symlink does; a directory not there yet is seen
  created). Writes in a directory are not watched, so a busy parent (one holding the SQLite
  file) does not make every second a look;
- every directory holding a symbolic link on the way to the two directories or to a
  symlinked file (``link_directories``): a release link switched (``ln -sfn``) anywhere
  along the way;
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
        self._warned: str | None = None  # the last warning given, not repeated at every look

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
        the existing ``files``, and watch them (again: a file replaced is a new inode). A watch
        new at this look may have missed a change made during it: the next ``quiet`` says
        "look" once more. A directory that does not exist is not watched: its parent's watch
        sees it created."""
        if self._unavailable:
            return
        if self._pid != os.getpid() or self._watching != directories:
            self.close()
        places = {*listing, *directories, *(os.path.dirname(os.path.abspath(d)) for d in directories)}
        for path in (*directories, *(f for f in files if os.path.islink(f))):
            places |= link_directories(path)
        wanted = [(path, ENTRY_EVENTS) for path in sorted(places) if os.path.isdir(path)]
        wanted += [(path, WRITE_EVENTS | SELF_EVENTS) for path in files]
        try:
            if self._inotify is None:
                self._inotify, self._pid, self._watching = INotify(), os.getpid(), directories
            descriptors = {self._inotify.add_watch(path, mask) for path, mask in wanted}
        except (OSError, AttributeError) as exc:
            # Not Linux (no inotify in its C library), a limit reached (fs.inotify.max_user_watches
            # or max_user_instances), a path removed meanwhile: look every time.
            lasting = not isinstance(exc, OSError) or exc.errno in (errno.ENOSYS, errno.EMFILE, errno.ENOSPC)
            self.close()
            self._unavailable = lasting
            self._warn(exc, lasting)
            return
        self._warned = None
        added = not descriptors <= self._descriptors
        self._descriptors |= descriptors
        self._looked_at = float("-inf") if added else now

    def _warn(self, exc: BaseException, lasting: bool) -> None:
        """Say once, not at every look, that this process looks every time, and why."""
        until = "" if lasting else " until a watch can be set"
        message = f"registry changes are looked for at every refresh in this process{until}: {exc}"
        if message != self._warned:
            logger.warning(message, extra={"action": "registry_notice_unavailable"})
            self._warned = message

    def close(self) -> None:
        """Drop the watches (a reset, a fork, other directories, an error). A forked process
        closes its own copy of the descriptor; its parent's watches are untouched."""
        if self._inotify is not None:
            self._inotify.close()
        self._inotify, self._pid, self._watching, self._descriptors = None, None, None, set()
        self._looked_at = float("-inf")


#: Most symbolic links followed on the way to one path, as the kernel's own limit (``ELOOP``).
MAX_LINKS = 40


def link_directories(path: str) -> set[str]:
    """The directories that hold a symbolic link met on the way to ``path`` (its own, its
    ancestors', and those of each link's target, in turn). A link replaced in one of them
    (``ln -sfn rel2 current``) changes what ``path`` names without an event at ``path``
    itself, so each is watched for its entries."""
    found, pending = set(), os.path.abspath(path)
    for _ in range(MAX_LINKS):
        parts = pending.split(os.sep)[1:]
        head = os.sep
        for index, part in enumerate(parts):
            candidate = os.path.join(head, part)
            if os.path.islink(candidate):
                found.add(head)
                target = os.path.join(head, os.readlink(candidate))
                pending = os.path.normpath(os.path.join(target, *parts[index + 1:]))
                break
            head = candidate
        else:
            return found
    return found
