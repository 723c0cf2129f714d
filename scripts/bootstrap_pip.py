"""Install pip into the running Python (a virtual environment made without it), from the package index.

Debian's and Ubuntu's python3 ship the venv module without ensurepip unless python3-venv is
installed, so ``python3 -m venv`` cannot put pip into a new environment. This script does what
ensurepip would: it reads the index's page for pip (PEP 503 simple API: ``$PIP_INDEX_URL`` or
PyPI), takes the newest stable ``py3-none-any`` wheel that is not yanked, checks its SHA-256
against the digest the index publishes, and installs that wheel with itself. Standard library only;
the system's certificates, or the bundle named by ``$PIP_CERT`` as pip itself would use it.
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
CONTEXT = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
WHEEL = re.compile(r"pip-(\d+(?:\.\d+)*)-py3-none-any\.whl$")


class _Links(html.parser.HTMLParser):
    """The anchors of a simple-API page: (url, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.links.append((str(found["href"]), found))


def newest_wheel(page: str, base: str) -> tuple[str, str, str]:
    """(version, url, sha256) of the newest stable, not yanked pip wheel on an index page."""
    parser = _Links()
    parser.feed(page)
    best: tuple[tuple[int, ...], str, str, str] | None = None
    for href, attrs in parser.links:
        url = urllib.parse.urljoin(base, href)
        path, _, fragment = url.partition("#")
        match = WHEEL.search(urllib.parse.unquote(path.rsplit("/", 1)[-1]))
        if not match or "data-yanked" in attrs or not fragment.startswith("sha256="):
            continue
        version = tuple(int(part) for part in match.group(1).split("."))
        if best is None or version > best[0]:
            best = (version, match.group(1), path, fragment[len("sha256="):])
    if best is None:
        raise SystemExit(f"bootstrap_pip: no pip wheel with a sha256 digest at {base}")
    return best[1], best[2], best[3]


def main() -> int:
    base = f"{INDEX}/pip/"
    with urllib.request.urlopen(base, timeout=60, context=CONTEXT) as response:
        page = response.read().decode("utf-8", errors="replace")
    version, url, digest = newest_wheel(page, base)
    with urllib.request.urlopen(url, timeout=300, context=CONTEXT) as response:
        data = response.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise SystemExit(f"bootstrap_pip: {url} does not match the index's sha256 {digest}")
    with tempfile.TemporaryDirectory() as folder:
        wheel = os.path.join(folder, f"pip-{version}-py3-none-any.whl")
        with open(wheel, "wb") as out:
            out.write(data)
        # a pip wheel runs from the zip itself and installs itself
        return subprocess.call([sys.executable, f"{wheel}/pip", "install", "-q", "--no-index", wheel])


if __name__ == "__main__":
    sys.exit(main())
