"""Files written whole or not at all: a process killed while it writes leaves the old file (or none), never the
first part of a new one, which a reader would take for a shorter trace or table."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; when the block ends it replaces `path` in one step, and when
    the block raises it is removed. Its name ends with `path`'s, so writers that read the extension (pandas'
    compression, Parquet or CSV by suffix) treat it alike; it is made with the process's umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{os.getpid()}-{threading.get_ident()}.{path.name}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text)
