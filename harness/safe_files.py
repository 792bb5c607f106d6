"""Files in an evidence folder, written and read as the harness's and nothing else's.

The agent runs as the same user as the harness and writes into its evidence folder, so whatever it leaves at a
name the harness uses is hostile: a symlink (a write through it lands outside the folder), a FIFO or a device (a
read never ends), a sparse giant (a 1 GiB line read whole). Every write into and read from an evidence folder
goes through here:

- the folder is opened once per call as a directory fd with ``O_NOFOLLOW`` (the folder itself swapped for a
  symlink is refused), and the file is opened relative to it, ``O_NOFOLLOW`` too;
- a write goes to a new file of an unpredictable name (``O_CREAT | O_EXCL``) beside its target, then is renamed
  over it: a symlink, FIFO or file left at the name is replaced, never written through;
- a read opens without blocking (a FIFO opens at once), refuses anything ``fstat`` says is not a regular file,
  and refuses a file over its bound from its size, before reading a byte.

Stdlib only: the fault proxy's process and the destination processes use it too.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from harness.errors import EvidenceError

# what the harness reads of a file it wrote itself (context, journal, ledger dump, verdict): far above any real
# run's, far below what would exhaust memory; the agent's own log has its own limit (harness.limits)
HARNESS_FILE_BYTES = 1 << 30
SMALL_FILE_BYTES = 1 << 20  # a checkpoint, a key

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class UnsafeFile(EvidenceError):
    """Raised when a file of an evidence folder is not one the harness may read or write: not a regular file
    (a FIFO, a device, a folder), a symlink, or over its bound. The message names the file and what it is."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def folder_fd(folder: str | os.PathLike[str], *, follow: bool = False) -> Iterator[int]:
    """The folder as a directory fd, the folder itself not followed if it is a symlink (unless ``follow``: a
    folder the user named, not an evidence folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY | (0 if follow else _NOFOLLOW) | _CLOEXEC)
    except OSError as exc:
        raise UnsafeFile(f"{folder}: cannot open the folder ({exc.strerror or exc}); a symlink in its place is "
                         "refused") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _write_at(fd: int, name: str, parts: Iterable[bytes], mode: int) -> None:
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"  # unpredictable: nothing can be waiting at it
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as handle:
            for part in parts:
                handle.write(part)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)  # over a symlink: the link is replaced, not followed
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


def write_file(path: str | os.PathLike[str], data: bytes | str | Iterable[bytes], *, mode: int = 0o644,
               follow_folder: bool = False) -> None:
    """``data`` into ``path``, whole or not at all, as a file the harness made: written to a new file of an
    unpredictable name in the same folder, then renamed over ``path`` (whatever was there, a symlink included,
    is replaced). A folder at ``path`` is an ``UnsafeFile``. ``follow_folder``: ``path``'s folder is one the user
    named (``--html PATH``), which may be a symlink; an evidence folder never is."""
    path = Path(path)
    parts: Iterable[bytes] = [data.encode("utf-8")] if isinstance(data, str) else \
        [data] if isinstance(data, bytes) else data
    with folder_fd(path.parent, follow=follow_folder) as fd:
        try:
            _write_at(fd, path.name, parts, mode)
        except IsADirectoryError:
            raise UnsafeFile(f"{path}: a folder stands where the harness writes a file; it is not the "
                             "harness's, so nothing was written") from None


def create_new_fd(path: str | os.PathLike[str], *, append: bool = True, mode: int = 0o644) -> int:
    """A new, empty file at ``path`` to write to as it goes (the proxy's journal and traffic files), as an fd:
    made under an unpredictable name and renamed over ``path``, so whatever stood there (a symlink, a FIFO, an
    older file) is replaced, never opened. ``append``: ``O_APPEND`` (not for a writer that writes at offsets)."""
    path = Path(path)
    with folder_fd(path.parent) as fd:
        tmp = f".{path.name}.{secrets.token_hex(8)}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_APPEND if append else 0) | _NOFOLLOW
                      | _CLOEXEC, mode, dir_fd=fd)
        try:
            os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
    return out


def create_new(path: str | os.PathLike[str], *, mode: int = 0o644) -> BinaryIO:
    """``create_new_fd`` as a binary file to append to."""
    return os.fdopen(create_new_fd(path, mode=mode), "ab")


def open_append(path: str | os.PathLike[str], *, mode: int = 0o644) -> BinaryIO:
    """``path`` to append to (the agent's stdout and stderr, kept over its restarts): the regular file there, else a
    new one (``create_new``), so that a FIFO the agent left at the name (whose open would wait for a reader that
    never comes) or a symlink is replaced, never opened."""
    path = Path(path)
    with folder_fd(path.parent) as fd:
        try:
            out = os.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode,
                          dir_fd=fd)
        except OSError:  # ELOOP: a symlink; ENXIO: a FIFO nobody reads
            return create_new(path, mode=mode)
    if not stat.S_ISREG(os.fstat(out).st_mode):
        os.close(out)
        return create_new(path, mode=mode)
    if _NONBLOCK:
        import fcntl

        fcntl.fcntl(out, fcntl.F_SETFL, fcntl.fcntl(out, fcntl.F_GETFL) & ~_NONBLOCK)
    return os.fdopen(out, "ab")


def open_regular(path: str | os.PathLike[str], limit: int, *, what: str | None = None) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file (not a symlink) of at most ``limit`` bytes; else an
    ``UnsafeFile`` saying what it is. A missing file is ``FileNotFoundError``, as ``open`` raises it."""
    path = Path(path)
    name = what or path.name
    with folder_fd(path.parent) as fd:
        try:
            handle = os.open(path.name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=fd)
        except FileNotFoundError:
            raise
        except OSError as exc:  # ELOOP: a symlink at the name
            kind = "a symlink" if os.path.islink(path) else exc.strerror or str(exc)
            raise UnsafeFile(f"{name}: {kind}, not a regular file the harness wrote or the agent appended to; "
                             "it is not read") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{name}: {_kind(info.st_mode)}, not a regular file; it is not read")
        if info.st_size > limit:
            raise UnsafeFile(f"{name}: {info.st_size:,} bytes, over the {limit:,} bytes the harness reads of it; "
                             "it is not read")
        if _NONBLOCK:  # a regular file: back to ordinary reads
            import fcntl

            fcntl.fcntl(handle, fcntl.F_SETFL, fcntl.fcntl(handle, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(handle)
        raise
    return os.fdopen(handle, "rb")


def open_regular_text(path: str | os.PathLike[str], limit: int, *, what: str | None = None) -> TextIO:
    """``open_regular`` as text for reading lines, bad bytes kept as lone surrogates (``harness.ndjson``)."""
    return io.TextIOWrapper(open_regular(path, limit, what=what), encoding="utf-8", errors="surrogateescape")


def read_regular(path: str | os.PathLike[str], limit: int = HARNESS_FILE_BYTES, *, what: str | None = None) -> bytes:
    """The bytes of ``path`` (``open_regular``'s checks), at most ``limit`` of them: a file that grew past it
    while read is refused too."""
    with open_regular(path, limit, what=what) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{what or Path(path).name}: grew past {limit:,} bytes while read; it is not read")
    return data


def regular_size(path: str | os.PathLike[str]) -> int | None:
    """The size of ``path`` if it is a regular file (not followed if a symlink), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def fd_path(fd: int, name: str) -> str:
    """A path to ``name`` in the folder ``fd`` that does not go through the folder's name again (for a library
    that opens by path, as SQLite does): ``/proc/self/fd/N/name`` where there is one."""
    proc = f"/proc/self/fd/{fd}"
    return f"{proc}/{name}" if os.path.isdir(proc) else name


# An evidence folder holds the agent's state dir, which the agent shapes as it likes: a tree thousands of folders
# deep makes ``shutil.rmtree`` and ``Path.rglob`` (recursive in Python 3.11) raise RecursionError, and its paths
# outgrow PATH_MAX. These two walk it without recursion and without following a symlink.
_FOLDER_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC


def remove_tree(path: str | os.PathLike[str]) -> None:
    """``path`` and all it holds removed, as ``shutil.rmtree(path, ignore_errors=True)`` would, whatever its depth:
    each folder's subfolders are moved up into ``path`` before it is removed, so two folder fds are open at a time
    and no path is longer than two names. Symlinks are removed, never followed; what cannot be removed is left."""
    path = Path(path)
    try:
        top = os.open(path, _FOLDER_FLAGS)
    except FileNotFoundError:
        return
    except OSError:  # a file or a symlink at the name: it alone goes
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    try:
        changed = True
        while changed:  # a pass per level of the tree: each moves the level below up into ``top``
            changed = False
            for name in _listed(top):
                changed |= _remove_entry(top, name)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _listed(fd: int) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError:
        return []


def _is_folder(name: str, fd: int) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)


def _remove_entry(top: int, name: str) -> bool:
    """``name`` in ``top`` removed: a file unlinked; a folder's files unlinked and its subfolders moved up into
    ``top`` (under new names), then the folder removed. Whether anything changed."""
    try:
        if not _is_folder(name, top):
            os.unlink(name, dir_fd=top)
            return True
        fd = os.open(name, _FOLDER_FLAGS, dir_fd=top)
    except OSError:
        return False
    changed = False
    try:
        for child in _listed(fd):
            try:
                if _is_folder(child, fd):
                    os.rename(child, f".removed-{secrets.token_hex(8)}", src_dir_fd=fd, dst_dir_fd=top)
                else:
                    os.unlink(child, dir_fd=fd)
                changed = True
            except OSError:
                continue
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=top)
    except OSError:
        return changed
    return True


def regular_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The regular files under ``folder`` (symlinks neither listed nor followed), sorted, found without recursion;
    a folder that cannot be listed (its path over PATH_MAX, say) is skipped."""
    found, todo = [], [Path(folder)]
    while todo:
        here = todo.pop()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        found.append(Path(entry.path))
        except OSError:
            continue
    return sorted(found)
