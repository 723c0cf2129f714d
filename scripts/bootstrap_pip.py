"""Install pip into the running Python (a virtual environment made without it), from the package index.

Debian's and Ubuntu's python3 ship the venv module without ensurepip unless python3-venv is
installed, so ``python3 -m venv`` cannot put pip into a new environment. This script does what
ensurepip would: it reads the index's page for pip (PEP 503 simple API), takes the newest stable
``py3-none-any`` wheel that is not yanked, checks its SHA-256 against the digest the index
publishes, and installs that wheel with itself. Standard library only.

It reaches the index as pip itself would, from pip's own settings (:func:`pip_settings`):

- the configuration files pip reads, in pip's order, a later one overriding an earlier one:
  ``pip.conf`` in each of ``$XDG_CONFIG_DIRS`` (``/etc/xdg``) under ``pip/``, ``/etc/pip.conf``,
  ``~/.pip/pip.conf``, ``~/.config/pip/pip.conf`` (``$XDG_CONFIG_HOME``), ``pip.conf`` of the
  environment (``sys.prefix``), then ``$PIP_CONFIG_FILE`` (when it names an existing file, the user
  files are not read; ``os.devnull`` reads none); in each, the ``[global]`` section, then the
  ``[install]`` section over it;
- then the environment: ``PIP_INDEX_URL``, ``PIP_CERT``, ``PIP_TRUSTED_HOST``, ``PIP_PROXY``,
  ``PIP_TIMEOUT`` / ``PIP_DEFAULT_TIMEOUT``;
- the settings used: ``index-url`` (PyPI by default), ``cert`` (the CA bundle that checks the
  index's certificate; the system's by default), ``trusted-host`` (hosts, or host:port, whose
  certificate is not checked), ``proxy`` (else ``https_proxy`` / ``http_proxy`` and ``no_proxy``,
  as urllib reads them) and ``timeout``.

Any failure (an unreadable pip.conf, an index that cannot be reached or has no pip wheel, a wheel
whose digest differs) is one line on stderr naming what to check or set, exit status 1.
"""

from __future__ import annotations

import configparser
import hashlib
import html.parser
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Mapping

PYPI = "https://pypi.org/simple"
WHEEL = re.compile(r"pip-(\d+(?:\.\d+)*)-py3-none-any\.whl$")
#: The settings read, by pip's option name (pip's environment variable is PIP_ + the name in
#: capitals with "_" for "-"; "default-timeout" is pip's other name for "timeout").
SETTINGS = ("index-url", "cert", "trusted-host", "proxy", "timeout")
_ALIASES = {"default-timeout": "timeout"}
#: What to set, named in the one-line errors.
HOW = ("set index-url (and cert, trusted-host or proxy) in pip.conf, or PIP_INDEX_URL, PIP_CERT, "
       "PIP_TRUSTED_HOST, https_proxy")


class BootstrapError(Exception):
    """A failure told in one line."""


@dataclass
class Settings:
    index_url: str = PYPI
    cert: str | None = None
    trusted_hosts: list[str] = field(default_factory=list)
    proxy: str | None = None
    timeout: float = 60.0
    #: where each setting came from ("PIP_INDEX_URL", "/etc/pip.conf [global]", ...)
    origin: dict[str, str] = field(default_factory=dict)

    def said(self, name: str) -> str:
        """``name`` with where it was set, for an error message."""
        return f"{name} from {self.origin[name]}" if name in self.origin else name


def config_files(environ: Mapping[str, str], prefix: str = sys.prefix, etc: str = "/etc") -> list[str]:
    """pip's configuration files in the order pip reads them (a later one overrides an earlier one)."""
    config_file = environ.get("PIP_CONFIG_FILE")
    if config_file == os.devnull:
        return []
    xdg_dirs = [d for d in environ.get("XDG_CONFIG_DIRS", "").split(os.pathsep) if d] or [f"{etc}/xdg"]
    files = [os.path.join(d, "pip", "pip.conf") for d in xdg_dirs] + [os.path.join(etc, "pip.conf")]
    if not (config_file and os.path.exists(config_file)):
        home = environ.get("HOME") or os.path.expanduser("~")
        files += [os.path.join(home, ".pip", "pip.conf"),
                  os.path.join(environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "pip", "pip.conf")]
    files.append(os.path.join(prefix, "pip.conf"))
    if config_file:
        files.append(config_file)
    return files


def pip_settings(environ: Mapping[str, str] = os.environ, prefix: str = sys.prefix, etc: str = "/etc") -> Settings:
    """The index settings pip would use, from its configuration files and then the environment."""
    values: dict[str, tuple[str, str]] = {}
    for path in config_files(environ, prefix, etc):
        if not os.path.isfile(path):
            continue
        parser = configparser.RawConfigParser()
        try:
            with open(path, encoding="utf-8") as handle:
                parser.read_file(handle)
        except (OSError, UnicodeDecodeError, configparser.Error) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise BootstrapError(f"cannot read pip's configuration file {path}: {first}") from None
        for section in ("global", "install"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    name = _ALIASES.get(key.replace("_", "-"), key.replace("_", "-"))
                    if name in SETTINGS:
                        values[name] = (value.strip(), f"{path} [{section}]")
    for name in SETTINGS + tuple(_ALIASES):
        var = "PIP_" + name.upper().replace("-", "_")
        if environ.get(var):
            values[_ALIASES.get(name, name)] = (environ[var].strip(), var)
    settings = Settings()
    for name, (value, origin) in values.items():
        settings.origin[name] = origin
        if name == "index-url":
            settings.index_url = value.rstrip("/") or PYPI
        elif name == "cert":
            settings.cert = value or None
        elif name == "trusted-host":
            settings.trusted_hosts = value.split()
        elif name == "proxy":
            settings.proxy = value or None
        elif name == "timeout":
            try:
                settings.timeout = float(value)
            except ValueError:
                raise BootstrapError(f"{settings.said('timeout')} is {value!r}, not a number of seconds") from None
    if settings.cert and not os.path.exists(settings.cert):
        raise BootstrapError(f"{settings.said('cert')} names {settings.cert}, which does not exist; "
                             f"set cert in pip.conf or PIP_CERT to the CA bundle that signs the index's certificate")
    return settings


def _trusted(url: str, hosts: list[str]) -> bool:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    with_port = f"{host}:{parts.port}" if parts.port else host
    return host in hosts or with_port in hosts


def opener(settings: Settings, url: str) -> urllib.request.OpenerDirector:
    """An opener for ``url``: the CA bundle (none checked for a trusted host) and the proxy pip would use."""
    if _trusted(url, settings.trusted_hosts):
        context = ssl._create_unverified_context()  # pip's trusted-host: no certificate check
    else:
        try:
            cert = settings.cert
            context = ssl.create_default_context(cafile=cert if cert and not os.path.isdir(cert) else None,
                                                 capath=cert if cert and os.path.isdir(cert) else None)
        except (OSError, ssl.SSLError) as error:
            raise BootstrapError(f"{settings.said('cert')}: {settings.cert} is not a CA bundle ({error}); "
                                 f"set cert in pip.conf or PIP_CERT to one") from None
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=context)]
    if settings.proxy:
        handlers.append(urllib.request.ProxyHandler({"http": settings.proxy, "https": settings.proxy}))
    # else urllib's default ProxyHandler: http_proxy, https_proxy, no_proxy
    return urllib.request.build_opener(*handlers)


def fetch(settings: Settings, url: str) -> bytes:
    """The body at ``url``, or a one-line error naming the settings that decide how it is reached."""
    try:
        with opener(settings, url).open(url, timeout=settings.timeout) as response:
            return response.read()
    except urllib.error.HTTPError as error:
        raise BootstrapError(f"the package index ({settings.said('index-url')}) answered {error.code} "
                             f"{error.reason} for {url}; {HOW}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        hint = HOW
        if isinstance(reason, ssl.SSLCertVerificationError):
            hint = (f"set cert in pip.conf or PIP_CERT to the CA bundle that signs it"
                    f"{' (now ' + settings.said('cert') + ')' if settings.cert else ''}, "
                    f"or list the host in trusted-host (PIP_TRUSTED_HOST)")
        proxy = settings.proxy and f", through the proxy {settings.said('proxy')}"
        raise BootstrapError(f"cannot fetch {url} from the package index ({settings.said('index-url')}"
                             f"{proxy or ''}): {reason}; {hint}") from None


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
        raise BootstrapError(f"no pip wheel with a sha256 digest at {base}")
    return best[1], best[2], best[3]


def bootstrap(settings: Settings) -> int:
    """Fetch, check and install the newest pip wheel of the index; pip's exit status."""
    base = f"{settings.index_url}/pip/"
    page = fetch(settings, base).decode("utf-8", errors="replace")
    try:
        version, url, digest = newest_wheel(page, base)
    except BootstrapError as error:
        raise BootstrapError(f"{error} ({settings.said('index-url')}); {HOW}") from None
    data = fetch(settings, url)
    if hashlib.sha256(data).hexdigest() != digest:
        raise BootstrapError(f"{url} does not match the index's sha256 {digest}")
    with tempfile.TemporaryDirectory() as folder:
        wheel = os.path.join(folder, f"pip-{version}-py3-none-any.whl")
        with open(wheel, "wb") as out:
            out.write(data)
        # a pip wheel runs from the zip itself and installs itself
        return subprocess.call([sys.executable, f"{wheel}/pip", "install", "-q", "--no-index", wheel])


def main(environ: Mapping[str, str] = os.environ, prefix: str = sys.prefix, etc: str = "/etc") -> int:
    try:
        return bootstrap(pip_settings(environ, prefix, etc))
    except BootstrapError as error:
        print(f"bootstrap_pip: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bootstrap_pip: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
