"""harness.evidence_archive: an evidence folder packed into one string (a remote worker's report) and unpacked
on the controller, byte for byte; an archive that would write outside its folder is refused whole."""

from __future__ import annotations

import base64
import io
import os
import tarfile
from pathlib import Path

import pytest

from harness.evidence_archive import EvidenceArchiveError, pack, unpack
from harness.safe_files import remove_tree


def test_a_folder_comes_back_byte_for_byte_under_its_new_path(tmp_path: Path) -> None:
    folder = tmp_path / "response_lost-20261204-000000-abcdef"
    (folder / "agent").mkdir(parents=True)
    files = {"agent.ndjson": b'{"event": "operation"}\n', "ledger.sqlite": bytes(range(256)) * 40,
             "agent/state.json": b"{}"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    archive = pack(folder)
    assert isinstance(archive, str)  # crosses execnet as a plain string
    here = unpack(archive, tmp_path / "controller" / folder.name)
    assert {p.relative_to(here).as_posix(): p.read_bytes() for p in here.rglob("*") if p.is_file()} == files


def test_a_state_dir_of_any_depth_is_packed_without_its_links_and_removed(tmp_path: Path) -> None:
    """The agent shapes its state dir: a tree deeper than a recursive walk can go (``shutil.rmtree`` and
    ``Path.rglob`` raised RecursionError), a symlink out of the folder. Packed: the files within reach, no link;
    removed: all of it, the link's target untouched."""
    folder, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("x")
    (folder / "agent-state").mkdir(parents=True)
    (folder / "agent.ndjson").write_text("{}\n")
    (folder / "agent-state" / "out").symlink_to(outside)
    fd = os.open(folder / "agent-state", os.O_RDONLY)
    for _ in range(1200):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    here = unpack(pack(folder), tmp_path / "controller" / "run")
    assert [p.relative_to(here).as_posix() for p in here.rglob("*") if p.is_file()] == ["agent.ndjson"]
    remove_tree(folder)
    assert not folder.exists() and (outside / "kept").read_text() == "x"


def _archive(member: tarfile.TarInfo, data: bytes = b"x") -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize("name", ["../outside.txt", "/etc/evil", "a/../../b"])
def test_a_member_that_would_land_outside_the_folder_is_refused_and_nothing_unpacked(tmp_path: Path, name) -> None:
    with pytest.raises(EvidenceArchiveError, match="would land outside"):
        unpack(_archive(tarfile.TarInfo(name)), tmp_path / "run")
    assert not (tmp_path / "run").exists() and not (tmp_path / "outside.txt").exists()


def test_a_link_is_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("ledger.sqlite")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    with pytest.raises(EvidenceArchiveError, match="not a plain file"):
        unpack(_archive(link), tmp_path / "run")


def test_what_is_no_archive_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(EvidenceArchiveError, match="not an archive of an evidence folder.*evidence_archive.pack"):
        unpack("not base64!", tmp_path / "run")
