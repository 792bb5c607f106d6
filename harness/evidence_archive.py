"""An evidence folder as one string, and back: how a remote pytest-xdist worker's run reaches the controller.

A worker on another machine writes its evidence there; the plugin packs the folder into its test report (a
gzipped tar, base64: a string crosses execnet as it is, like the result's JSON) and the controller unpacks it into
its own evidence root under the same folder name, so that ``python -m harness check FOLDER`` works there.
Unpacking refuses what could land outside the new folder (absolute names, ``..``, links, devices).
"""

from __future__ import annotations

import base64
import contextlib
import io
import tarfile
from pathlib import Path

from harness.safe_files import regular_files, remove_tree


class EvidenceArchiveError(ValueError):
    """Raised when an archive of an evidence folder cannot be unpacked: not one, or a member that would land
    outside the folder it is unpacked into."""


def pack(folder: Path) -> str:
    """``folder``'s files (recursively) as a base64 gzipped tar, names relative to ``folder``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path in regular_files(folder):  # the agent's state dir may be a tree of any depth
            with contextlib.suppress(OSError):  # a path past PATH_MAX: left out
                tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack(archive: str, folder: Path) -> Path:
    """Unpack ``pack``'s output into ``folder`` (made here; it must not exist yet) and return it."""
    try:
        data = base64.b64decode(archive.encode("ascii"), validate=True)
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (ValueError, tarfile.TarError, OSError) as exc:
        raise EvidenceArchiveError(f"not an archive of an evidence folder ({exc}); expected what "
                                   f"harness.evidence_archive.pack makes") from None
    with tar:
        members = tar.getmembers()
        for member in members:
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise EvidenceArchiveError(f"the archive's member {member.name!r} would land outside {folder} "
                                           f"(or is not a plain file); nothing was unpacked")
        folder.mkdir(parents=True, exist_ok=False)
        try:
            # the members were checked above; the data filter (Python 3.11.4+, not Debian bookworm's 3.11.2) also
            # drops modes an evidence file never needs
            if hasattr(tarfile, "data_filter"):
                tar.extractall(folder, members=members, filter="data")
            else:
                tar.extractall(folder, members=members)
        except BaseException:
            remove_tree(folder)
            raise
    return folder
