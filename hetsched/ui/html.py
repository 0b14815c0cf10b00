"""A figure's self-contained HTML (Vega inlined), as vl-convert writes it, without bundling Vega every process.

`vl_convert.vegalite_to_html(spec, bundle=True)` bundles Vega, Vega-Lite and vega-embed into the page: 0.9 MB of
JavaScript that takes about 1.7 s to build on the first call in each process, and every notebook is a process of
its own. The page is that bundle plus the spec, so the page around the spec (its shell) is built once per
vl-convert version, kept in a file, and each figure's spec is put into it. tests/test_plots.py checks that the
page equals vl-convert's own, spec for spec.

The shell lives in `$HETSCHED_CACHE_DIR` (default `$XDG_CACHE_HOME/hetsched`, i.e. `~/.cache/hetsched`). When the
folder cannot be written, or vl-convert writes the spec in a way this module does not recognise, every page is
vl-convert's own call, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path

_MARK = "hetsched-figure-spec-0f4e2c"       # a string no real spec holds: where the shell's spec goes
_PROBE = {"description": _MARK, "mark": "point"}
_lock = threading.Lock()
_shell: tuple[str, str] | None = None       # (before the spec, after it), once read or built in this process


def cache_dir() -> Path:
    """The folder of hetsched's per-user caches."""
    base = os.environ.get("HETSCHED_CACHE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hetsched"


def _spec_json(spec: dict) -> str:
    """The spec as the page's script reads it: compact JSON in which no `</script>` can end the script early."""
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")


def _split(page: str) -> tuple[str, str] | None:
    """vl-convert's page for `_PROBE`, cut around the probe's JSON; None unless it appears exactly once."""
    probe = json.dumps(_PROBE, separators=(",", ":"))
    if page.count(probe) != 1 or page.count(_MARK) != 1:
        return None
    head, tail = page.split(probe)
    return head, tail


def _load_shell() -> tuple[str, str] | None:
    import vl_convert as vlc

    versions = f"vl-convert {getattr(vlc, '__version__', '?')}, vega-lite {vlc.get_vegalite_versions()[-1]}"
    path = cache_dir() / f"vega-page-{hashlib.sha1(versions.encode()).hexdigest()[:12]}.html"
    try:
        first, page = path.read_text(encoding="utf-8").split("\n", 1)
        shell = _split(page) if first == f"<!-- {versions} -->" else None
        if shell is not None:
            return shell
    except (OSError, ValueError):
        pass                               # no file yet, or not ours: build it
    page = vlc.vegalite_to_html(_PROBE, bundle=True)
    shell = _split(page)
    if shell is not None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(f"<!-- {versions} -->\n{page}", encoding="utf-8")
            os.replace(tmp, path)          # whole or not at all, whichever process writes it
        except OSError:                    # read-only home, full disk: this process keeps its shell in memory
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return shell


def vegalite_page(spec: dict) -> str:
    """The self-contained HTML page of a Vega-Lite spec: vl-convert's `vegalite_to_html(spec, bundle=True)`."""
    global _shell
    with _lock:
        if _shell is None:
            _shell = _load_shell() or ("", "")
        head, tail = _shell
    if not head:
        import vl_convert as vlc

        return vlc.vegalite_to_html(spec, bundle=True)
    return head + _spec_json(spec) + tail
