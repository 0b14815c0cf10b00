"""No file of the artifacts' (../shared) is committed verbatim; no machine paths leak into the repo."""

import hashlib
import subprocess

from conftest import REPO


def _tracked_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / p for p in out.decode().split("\0") if p and (REPO / p).is_file()]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_shared_file_is_committed_verbatim(shared_dir):
    shared = {_digest(p): p for p in shared_dir.rglob("*") if p.is_file() and p.stat().st_size > 64}
    copies = [(str(p.relative_to(REPO)), str(shared[_digest(p)])) for p in _tracked_files()
              if p.stat().st_size > 64 and _digest(p) in shared]
    assert copies == []


def test_no_absolute_paths_of_this_machine():
    needles = [b"/" + b"work/", b"/" + b"root/", b"/tmp/" + b"bash_jobs"]  # split so this file passes
    offenders = [str(p.relative_to(REPO)) for p in _tracked_files()
                 if p.suffix not in (".parquet", ".png") and any(n in p.read_bytes() for n in needles)]
    assert offenders == []
