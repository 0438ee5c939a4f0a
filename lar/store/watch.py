"""A cheap change token for the folder: has anything changed since the last full scan?

A search with a building layer needs the file index current, which the full stat pass gives at
O(files) per call (a ripgrep listing plus one ``stat`` a file). While an engine is open this
module keeps Linux inotify watches (``inotify_simple``, the ``watch`` extra) on every folder that
holds a listed file, and their parents up to the root; the kernel queues an event at the moment of
each write, rename, create, delete or metadata change, so a non-blocking read of the queue
(:meth:`FolderWatch.stale`) tells exactly, in O(1), whether the folder may have changed since
:meth:`FolderWatch.begin` was called before the last scan. Events that arrive during a scan stay
queued and make the next check stale.

Wherever watching is not possible (no inotify, the package missing, the watch limit reached, a
watched folder moved or deleted, a queue overflow, ``LAR_WATCH=0``) :meth:`stale` answers True
and the caller runs the full stat pass as before. What a watch cannot see: changes made on
another machine to a network filesystem, and ignore files above the root (a ``.gitignore`` in a
parent repository); set ``LAR_WATCH=0`` for such folders.
"""
from __future__ import annotations

import os
import threading
from typing import Iterable

ENV_WATCH = "LAR_WATCH"  # "0" turns the watcher off (every search with a building layer stats)

# what marks the folder changed; reads and opens (IN_ACCESS, IN_OPEN, IN_CLOSE_NOWRITE) do not
_MODIFY, _ATTRIB, _CLOSE_WRITE, _MOVED_FROM, _MOVED_TO = 0x2, 0x4, 0x8, 0x40, 0x80
_CREATE, _DELETE, _DELETE_SELF, _MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_Q_OVERFLOW, _IGNORED, _ONLYDIR, _DONT_FOLLOW = 0x4000, 0x8000, 0x01000000, 0x02000000
MASK = (_MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE
        | _DELETE_SELF | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW)
# a watched folder itself went away or moved: its path map is no longer true
_RESET = _DELETE_SELF | _MOVE_SELF | _IGNORED | _Q_OVERFLOW


def watch_enabled() -> bool:
    value = os.environ.get(ENV_WATCH, "").strip().lower()
    return value not in ("0", "false", "no", "off")


def folders_of(root: str, paths: Iterable[str]) -> set[str]:
    """The absolute folders that hold ``paths`` (relative POSIX paths under ``root``) and every
    folder between them and ``root``, ``root`` included."""
    out = {root}
    for rel in paths:
        parent = rel.rpartition("/")[0]
        while parent:
            folder = f"{root}/{parent}"
            if folder in out:
                break
            out.add(folder)
            parent = parent.rpartition("/")[0]
    return out


class FolderWatch:
    """inotify watches on a folder tree; see the module docstring. Thread-safe."""

    def __init__(self, root: str | os.PathLike, enabled: bool | None = None):
        self.root = os.fspath(root)
        self.enabled = watch_enabled() if enabled is None else bool(enabled)
        self.reason = "" if self.enabled else f"off ({ENV_WATCH}=0)"
        self._lock = threading.Lock()
        self._ino = None
        self._wds: dict[str, int] = {}
        self._dirty = True  # nothing is known until a scan has armed the watches
        self._armed = False
        self._reset = False

    @property
    def active(self) -> bool:
        """Whether the watches are in place (False: every :meth:`stale` is True)."""
        return self._ino is not None and self._armed

    def begin(self) -> None:
        """Call right before a full scan: what happened so far is covered by that scan."""
        with self._lock:
            self._drain()
            self._dirty = self._reset

    def arm(self, paths: Iterable[str]) -> None:
        """Call after a full scan with the paths it listed: watch their folders (new ones too).
        A folder first watched now may have gained files between the listing and its watch, so
        a later arm that adds folders leaves the token stale for one more scan."""
        with self._lock:
            if not self.enabled:
                return
            if self._reset:
                self._close()
                self._reset = False
                self._dirty = True
            if self._ino is None:
                try:
                    from inotify_simple import INotify
                    self._ino = INotify(nonblocking=True)
                except ImportError:
                    self._off("needs the optional package 'inotify_simple': pip install 'lar[watch]'")
                    return
                except (OSError, AttributeError) as exc:  # no inotify here (not Linux)
                    self._off(f"inotify unavailable: {exc}")
                    return
            new = folders_of(self.root, paths) - set(self._wds)
            for folder in sorted(new):
                try:
                    self._wds[folder] = self._ino.add_watch(folder, MASK)
                except FileNotFoundError:  # gone since the listing: that is a change
                    self._dirty = True
                except OSError as exc:  # e.g. the user's watch limit
                    self._off(f"could not watch {folder}: {exc}")
                    return
            if new and self._armed:
                self._dirty = True
            self._armed = True

    def stale(self) -> bool:
        """True unless the watches are in place and nothing changed since :meth:`begin`."""
        with self._lock:
            if self._ino is None or not self._armed:
                return True
            self._drain()
            return self._dirty

    def close(self) -> None:
        with self._lock:
            self._close()
            self._armed = False
            self._dirty = True

    # -- internals (called with the lock held) ----------------------------------------------
    def _drain(self) -> None:
        if self._ino is None:
            return
        try:
            events = self._ino.read(timeout=0)
        except OSError:
            events = None
        if events is None:
            self._dirty = self._reset = True
            return
        for ev in events:
            self._dirty = True
            if ev.mask & _RESET:
                self._reset = True

    def _close(self) -> None:
        if self._ino is not None:
            try:
                self._ino.close()
            except OSError:
                pass
        self._ino = None
        self._wds = {}

    def _off(self, reason: str) -> None:
        self._close()
        self.enabled = False
        self.reason = reason
        self._dirty = True


__all__ = ["ENV_WATCH", "FolderWatch", "MASK", "folders_of", "watch_enabled"]
