"""Where the files live: a folder on local disk, or a prefix on an object store (fsspec).

Both stores offer the same few operations on names relative to the folder (``read``,
``write``, ``names``, ``lock``); the protocol above them is the same on both. What
differs is how one file is replaced:

- :class:`LocalStore`: a temp file beside it, fsynced, renamed over it, the folder
  fsynced; a reader sees the old bytes or the new ones. Writers take ``flock`` on
  ``.lock`` for the whole run (kernel-held: a killed run never leaves it stale), and
  readers a shared one, so a reader waits for a writer instead of seeing its middle.
- :class:`ObjectStore` (S3, GCS, Azure… through ``universal_pathlib`` and the store's
  fsspec filesystem): one whole-object PUT; object stores make a PUT visible all at
  once or not at all, and S3 reads after a PUT see it. There is no rename and no lock:
  writers on any machine are serialized by the Dagster pool ``paid_orders_files``;
  a reader polls while the head says a run is writing (see ``state``).

Credentials and endpoints come from the store's own environment variables (for S3:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``), read by its SDK, never by us; errors are reworded so that no
secret and no credential in a URL ever reaches a message.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager, nullcontext
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..crash import crash_point
from ..errors import DayFilesError, StoreUnavailable
from ..secrets import redact, scrub
from .layout import LOCK_NAME, POINTER_DIR, is_temp_name, temp_name_for

if TYPE_CHECKING:
    from upath import UPath

_LOCAL_PROTOCOLS = ("", "file", "local")
# A local write that failed for want of space passes once space is freed (as a full
# database does, core/failures.py): transient. A folder it may not write is not.
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class Store(ABC):
    """A folder of files named relative to it, ``/``-separated (``_committed/x.json``)."""

    #: where the files are, as shown to users (a path, or a URL without credentials)
    location: str
    #: True when writers hold a lock that readers can wait on (local disk)
    locks: bool

    @abstractmethod
    def path(self, name: str = "") -> os.PathLike:
        """The full path (a ``Path`` or a ``UPath``) of ``name``."""

    @abstractmethod
    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``; None when it does not exist."""

    @abstractmethod
    def write(self, name: str, data: bytes, *, crash_at: str | None = None) -> None:
        """Replace ``name`` by ``data`` all at once; ``crash_at`` names the crash point
        just before the new bytes become visible."""

    def read_many(self, names: list[str]) -> dict[str, bytes | None]:
        """:meth:`read` of each of ``names`` (at once, where the store can)."""
        return {name: self.read(name) for name in names}

    def write_many(self, items: dict[str, bytes], *, crash_at: str | None = None) -> None:
        """:meth:`write` of each item, in any order (at once, where the store can)."""
        for name, data in items.items():
            self.write(name, data, crash_at=crash_at)

    @abstractmethod
    def remove(self, names: list[str]) -> None:
        """Remove each of ``names`` (one already gone is no error)."""

    @abstractmethod
    def names(self, sub: str = "") -> list[str]:
        """The names of the entries directly in the folder (or in its ``sub`` folder)."""

    def lock(self, *, shared: bool = False) -> ContextManager[None]:
        """Held for a writer's whole run (exclusive) or a reader's check (shared)."""
        return nullcontext()

    def prepare(self) -> None:
        """Make the folder before the first write (a no-op where folders do not exist)."""
        return None

    def clear_temps(self) -> list[str]:
        """Remove a killed writer's temp files; only while holding the exclusive lock."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class LocalStore(Store):
    """A local folder: temp + fsync + rename for each file, ``flock`` for each run."""

    locks = True

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.location = str(self.folder)

    def path(self, name: str = "") -> Path:
        return self.folder / name if name else self.folder

    def read(self, name: str) -> bytes | None:
        try:
            return (self.folder / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes, *, crash_at: str | None = None) -> None:
        final = self.folder / name
        temp = self.folder / temp_name_for(name)
        try:
            with open(temp, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # a writer killed here leaves only a temp file, which the next write clears
            if crash_at:
                crash_point(crash_at)
            os.replace(temp, final)
            _fsync_dir(final.parent)
        except OSError as exc:  # a full disk, a read-only folder: say which file, and that
            error = StoreUnavailable if exc.errno in _FULL_ERRNOS else DayFilesError
            raise error(  # the committed version was not touched
                f"could not write {final.name} in {final.parent}: "
                f"{exc.strerror or exc}. The previous version, if any, is untouched and still "
                "committed; free space or fix permissions, then run again."
            ) from exc
        finally:
            # After a successful rename the temp name no longer exists; after a failure it
            # must not stay behind.
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass

    def remove(self, names: list[str]) -> None:
        for name in names:
            try:
                os.unlink(self.folder / name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise DayFilesError(
                    f"could not remove {name} from {self.folder}: {exc.strerror or exc}"
                ) from exc
        if names:
            _fsync_dir(self.folder)

    def names(self, sub: str = "") -> list[str]:
        try:
            return os.listdir(self.folder / sub)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def lock(self, *, shared: bool = False) -> ContextManager[None]:
        return _flock(self.folder, shared=shared)

    def prepare(self) -> None:
        (self.folder / POINTER_DIR).mkdir(parents=True, exist_ok=True)

    def clear_temps(self) -> list[str]:
        removed = []
        for sub in ("", POINTER_DIR):
            for name in self.names(sub):
                if is_temp_name(name):
                    try:
                        os.unlink(self.folder / sub / name)
                        removed.append(f"{sub}/{name}" if sub else name)
                    except FileNotFoundError:
                        pass
        return removed


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _flock(folder: Path, *, shared: bool) -> Iterator[None]:
    path = folder / LOCK_NAME
    if shared:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            # No writer has ever run here, so there is nothing to wait for.
            yield
            return
    else:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                break
            except InterruptedError:
                continue
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class ObjectStore(Store):
    """A prefix on an object store: one whole-object PUT per file, no rename, no lock."""

    locks = False

    def __init__(self, root: UPath):
        # No listings cache: s3fs answers a read from a cached listing of the prefix, so
        # an object another process wrote after that listing would read as missing.
        if root.storage_options.get("use_listings_cache") is not False:
            root = type(root)(str(root), **{**root.storage_options, "use_listings_cache": False})
        self.root = root
        self.fs = root.fs
        self.base = str(PurePosixPath(root.path)).rstrip("/")
        self.location = redact(str(root)).rstrip("/")

    def _key(self, name: str) -> str:
        return f"{self.base}/{name}" if name else self.base

    def path(self, name: str = "") -> UPath:
        return self.root / name if name else self.root

    def read(self, name: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._key(name))
        except FileNotFoundError:
            return None
        except Exception as exc:  # the SDK's own errors: credentials, endpoint, network
            raise self._error("read", name, exc) from None

    def write(self, name: str, data: bytes, *, crash_at: str | None = None) -> None:
        # Nothing is visible before the PUT completes, so a writer killed here (or during
        # the PUT) leaves the previous object, whole.
        if crash_at:
            crash_point(crash_at)
        try:
            self.fs.pipe_file(self._key(name), data)
        except Exception as exc:
            raise self._error("write", name, exc) from None

    def read_many(self, names: list[str]) -> dict[str, bytes | None]:
        if len(names) < 2 or not getattr(self.fs, "async_impl", False):
            return super().read_many(names)
        keys = {self._key(name): name for name in names}
        try:  # concurrent GETs; a missing object comes back as its FileNotFoundError
            got = self.fs.cat(list(keys), on_error="return")
        except Exception as exc:
            raise self._error("read", f"{len(names)} files", exc) from None
        out: dict[str, bytes | None] = {}
        for key, name in keys.items():
            value = got.get(key, FileNotFoundError(key))
            if isinstance(value, FileNotFoundError):
                out[name] = None
            elif isinstance(value, Exception):
                raise self._error("read", name, value)
            else:
                out[name] = value
        return out

    def write_many(self, items: dict[str, bytes], *, crash_at: str | None = None) -> None:
        if len(items) < 2 or not getattr(self.fs, "async_impl", False):
            return super().write_many(items, crash_at=crash_at)
        if crash_at:
            crash_point(crash_at)
        try:  # concurrent PUTs; returns when every one of them has completed
            self.fs.pipe({self._key(name): data for name, data in items.items()})
        except Exception as exc:
            raise self._error("write", f"{len(items)} files", exc) from None
        return None

    def remove(self, names: list[str]) -> None:
        if not names:
            return
        try:
            self.fs.rm([self._key(name) for name in names])
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._error("remove", f"{len(names)} files", exc) from None

    def names(self, sub: str = "") -> list[str]:
        try:
            # refresh: never a cached listing; another writer may have changed the prefix
            entries = self.fs.ls(self._key(sub), detail=False, refresh=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise self._error("list", sub or "the folder", exc) from None
        return [PurePosixPath(entry).name for entry in entries]

    def _error(self, verb: str, name: str, exc: Exception) -> DayFilesError:
        """The SDK's error, reworded. A bucket that does not exist (FileNotFoundError) or
        refuses the credentials (PermissionError: s3fs's translation of AccessDenied,
        InvalidAccessKeyId, ExpiredToken...) is terminal; anything else (no answer from
        the endpoint, a timeout, throttling, a 5xx) is :class:`StoreUnavailable`, retried:
        a retry costs seconds, while a transient error taken for terminal fails the run."""
        why = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        hint = (
            "the bucket does not exist: create it, or fix PAID_ORDERS_URL"
            if isinstance(exc, FileNotFoundError)
            else "check PAID_ORDERS_URL and the store's credentials and endpoint variables "
            "(for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL)"
        )
        then = (
            " The previous version, if any, is untouched and still committed."
            if verb == "write"
            else ""
        )
        terminal = isinstance(exc, (FileNotFoundError, PermissionError))
        return (DayFilesError if terminal else StoreUnavailable)(
            f"could not {verb} {name} in {self.location}: "
            f"{type(exc).__name__}: {why}.{then} {hint}, then run again."
        )


def is_url(location: str) -> bool:
    """True for ``scheme://…`` (an fsspec URL), False for a local path."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", location))


def open_store(location: str | os.PathLike | Store) -> Store:
    """The store of a folder: a path (local disk), a ``file://`` URL, or any fsspec URL."""
    if isinstance(location, Store):
        return location
    # universal_pathlib and fsspec load only for a URL (a tenth of a second per process):
    # a location cannot be a UPath unless upath was imported already
    upath = sys.modules.get("upath")
    if upath is not None and isinstance(location, upath.UPath):
        if location.protocol in _LOCAL_PROTOCOLS:
            return LocalStore(location.path)
        return ObjectStore(location)
    if isinstance(location, str) and is_url(location):
        try:
            from upath import UPath

            root = UPath(location)
        except (ImportError, ValueError) as exc:
            raise DayFilesError(
                f"cannot open {redact(location)}: {scrub(str(exc).splitlines()[0])}. "
                "Install the fsspec filesystem of that store (S3: pip install "
                "'pipeline_assets[s3]'), or give a local path."
            ) from None
        return open_store(root)
    return LocalStore(location)


# --- local helpers kept for callers that work on one file ---------------------------------


def atomic_replace(final: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``final``, fsync it, rename it over ``final``."""
    final = Path(final)
    LocalStore(final.parent).write(final.name, data)


def temp_path_for(final: str | os.PathLike) -> Path:
    """A unique temp name beside ``final``: starts with ``.``, ends ``.partial``."""
    final = Path(final)
    return final.with_name(temp_name_for(final.name))
