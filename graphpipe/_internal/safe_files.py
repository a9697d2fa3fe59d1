"""Writing caches and scratch files without following planted symlinks, and reading
only inside a directory the user named.

A dataset directory is untrusted (any entry may be a planted symlink), so graphpipe writes
only into directories it checked are real (not symlinks), writes each file into a private
scratch directory it made (``mkdtemp``: mode 0700) and renames it into place (``rename``
replaces a symlink instead of writing through it), and reads a path a dataset names only
after resolving it and checking it stays inside the dataset directory.

Scratch directories are named ``.graphpipe-tmp-<pid>-<host>-*``; one left by a killed
process is removed by the next :func:`scratch_directory` in the same directory on the same
host (a directory shared over NFS may hold live scratch of other machines' processes).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import stat
import tempfile
from typing import Iterator, Sequence

__all__ = ["inside", "process_exists", "publish", "real_directory", "regular_file", "remove_stale_scratch", "scratch_directory"]

_SCRATCH_PREFIX = ".graphpipe-tmp-"


def _host() -> str:
    """This machine's name as it goes into scratch names (no ``-``, which separates fields)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def real_directory(path: str | os.PathLike, what: str, create: bool = False) -> str:
    """``path`` as a string after checking it is a directory and not a symlink
    (creating it when ``create`` and it is missing; its parent must exist).

    Raises:
        FileNotFoundError: it is missing (and ``create`` is false, or its parent is missing).
        ValueError: it is a symlink or not a directory.
    """
    path = os.fspath(path)
    if create:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{what}: cannot create directory '{path}': its parent directory does not exist"
            ) from None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what}: directory '{path}' does not exist") from None
    if stat.S_ISLNK(info.st_mode):
        raise ValueError(
            f"{what}: '{path}' is a symlink; graphpipe writes only into real directories "
            f"(remove the link, or point at its target)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{what}: '{path}' exists and is not a directory")
    return path


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_scratch(directory: str) -> None:
    """Remove scratch directories in ``directory`` left by processes of this host that no
    longer run (names without a host, ``.graphpipe-tmp-<pid>-<random>``, count as this host's)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    host = _host()
    for name in names:
        if not name.startswith(_SCRATCH_PREFIX):
            continue
        fields = name[len(_SCRATCH_PREFIX):].split("-")
        pid = fields[0]
        if len(fields) not in (2, 3) or (len(fields) == 3 and fields[1] != host):
            continue
        if not pid.isdigit() or int(pid) == os.getpid() or process_exists(int(pid)):
            continue
        entry = os.path.join(directory, name)
        try:
            mode = os.lstat(entry).st_mode
        except FileNotFoundError:  # another process cleaning up removed it since listdir
            continue
        if stat.S_ISDIR(mode):  # never follow a link planted under the prefix
            shutil.rmtree(entry, ignore_errors=True)  # what another process removes meanwhile is skipped


@contextlib.contextmanager
def scratch_directory(directory: str | os.PathLike, what: str) -> Iterator[str]:
    """A new private directory inside the real directory ``directory``, removed (with
    what is left in it) on exit; files made in it are moved out with :func:`publish`."""
    directory = real_directory(directory, what)
    remove_stale_scratch(directory)
    scratch = tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-{_host()}-", dir=directory)
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def publish(source: str, destination: str | os.PathLike) -> None:
    """Move the file ``source`` (made in a scratch directory beside it) to
    ``destination``, replacing a file or a symlink there (never writing through one)."""
    destination = os.fspath(destination)
    try:
        if stat.S_ISDIR(os.lstat(destination).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not replaced", destination)
    except FileNotFoundError:
        pass
    os.replace(source, destination)


def regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file itself (not a symlink to one): graphpipe reads
    its own cache files only then, so a planted link is never taken for a cache."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def inside(root: str | os.PathLike, path: str | os.PathLike, what: str, trusted: Sequence, opt_in: str) -> str:
    """``path`` (relative to ``root`` unless absolute) resolved through every symlink,
    after checking that it stays inside ``root`` or one of the ``trusted`` directories
    (all resolved too).

    Raises:
        ValueError: naming ``what`` (the entry that gave the path) when it points outside;
            the message tells to pass a directory holding it in ``opt_in``.
    """
    resolved = os.path.realpath(os.path.join(os.path.realpath(os.fspath(root)), os.fspath(path)))
    allowed = [os.path.realpath(os.fspath(d)) for d in (root, *trusted)]
    if any(os.path.commonpath([d, resolved]) == d for d in allowed):
        return resolved
    raise ValueError(
        f"{what}: '{os.fspath(path)}' resolves to '{resolved}', outside the directory '{allowed[0]}'"
        + (f" and the trusted directories {allowed[1:]}" if trusted else "")
        + f"; files a dataset names must stay inside it (symlinks included). If you trust this "
        f"location, pass a directory that holds it in {opt_in}"
    )
