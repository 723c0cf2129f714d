"""scripts/bootstrap_pip.py reaches the package index as pip would: pip.conf files in pip's order,
sections [global] and [install], the PIP_* variables, a proxy, a CA bundle, trusted hosts; and any
failure is one line naming what to set.

The index is a local HTTP (or HTTPS) server on 127.0.0.1 serving a simple page for pip and a fake
pip wheel whose ``pip/__main__.py`` only records how it was run; every test points the proxy
variables at a closed local port (except for 127.0.0.1), so nothing leaves this machine even where
a test fails.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import selectors
import socket
import ssl
import subprocess
import sys
import threading
import urllib.parse
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "bootstrap_pip.py"
#: A self-signed certificate for 127.0.0.1 (EC P-256, valid until 2126) and its key: the test
#: index's certificate and, as the CA bundle of pip.conf's ``cert``, its own issuer. A test key,
#: made for these tests only (openssl req -x509 ... -subj /CN=127.0.0.1 -addext
#: subjectAltName=IP:127.0.0.1, with the key usages Python 3.13's strict checks ask of a CA).
TEST_CERTIFICATE = """\
-----BEGIN CERTIFICATE-----
MIIBtjCCAV2gAwIBAgIUMmKP9QwCX08mdIGSTVXwr63O4KwwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTIwNjA2MTYzMVoYDzIxMjYxMTEy
MDYxNjMxWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAASqjplREHtdyYE9qsvT1/LN5CTJKNnB2n72AkfGKFlQNbC0wsZxB63q
MSCwm69X8NVxGCBbK/hhcgwcsKTW7e6co4GKMIGHMB0GA1UdDgQWBBRUK0cF2wWG
GqLiehjvu0nJLw0GMDAfBgNVHSMEGDAWgBRUK0cF2wWGGqLiehjvu0nJLw0GMDAP
BgNVHRMBAf8EBTADAQH/MA8GA1UdEQQIMAaHBH8AAAEwDgYDVR0PAQH/BAQDAgKE
MBMGA1UdJQQMMAoGCCsGAQUFBwMBMAoGCCqGSM49BAMCA0cAMEQCIAZnD+58T2ts
Tl6T5c7PePJbLKzScI6N/JpGX923p3LTAiBYH9nLQzarbnbxb/2zYNMWy9xgX4Ol
c/uirmkp3AK7Rw==
-----END CERTIFICATE-----
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgl9Png27Ly6DnFMoK
tiOugyCzfiC3bBmBwW82zleTVMqhRANCAASqjplREHtdyYE9qsvT1/LN5CTJKNnB
2n72AkfGKFlQNbC0wsZxB63qMSCwm69X8NVxGCBbK/hhcgwcsKTW7e6c
-----END PRIVATE KEY-----
"""


def _bootstrap_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bootstrap_pip
    finally:
        sys.path.pop(0)
    return bootstrap_pip


def fake_pip_wheel() -> bytes:
    """A wheel named like pip's whose ``pip/__main__.py`` writes its arguments to $FAKE_PIP_RECORD."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("pip/__init__.py", "")
        wheel.writestr("pip/__main__.py", "import os, sys\n"
                                          "open(os.environ['FAKE_PIP_RECORD'], 'w').write(' '.join(sys.argv[1:]))\n")
    return buffer.getvalue()


WHEEL = fake_pip_wheel()
WHEEL_NAME = "pip-99.0-py3-none-any.whl"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Index:
    """A PEP 503 index of one pip wheel on 127.0.0.1 (HTTPS with ``certfile``), which also serves as
    an HTTP proxy (absolute URLs, CONNECT tunnels to ``tunnel_to``). ``seen``: the request lines."""

    def __init__(self, certfile: Path | None = None, digest: str | None = None):
        self.seen: list[str] = []
        self.tunnel_to: tuple[str, int] | None = None
        index = self
        digest = digest or hashlib.sha256(WHEEL).hexdigest()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                index.seen.append(f"GET {self.path}")
                path = urllib.parse.urlsplit(self.path).path
                if path == "/simple/pip/":
                    body = (f'<html><body><a href="../../packages/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a>'
                            "</body></html>").encode()
                elif path == f"/packages/{WHEEL_NAME}":
                    body = WHEEL
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_CONNECT(self):
                index.seen.append(f"CONNECT {self.path}")
                upstream = socket.create_connection(index.tunnel_to)
                self.send_response(200)
                self.end_headers()
                self.wfile.flush()
                pump = selectors.DefaultSelector()
                pump.register(self.connection, selectors.EVENT_READ, upstream)
                pump.register(upstream, selectors.EVENT_READ, self.connection)
                open_ = True
                while open_:
                    for key, _ in pump.select(timeout=10):
                        data = key.fileobj.recv(65536)
                        if not data:
                            open_ = False
                            break
                        key.data.sendall(data)
                upstream.close()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if certfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(certfile)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.scheme = "https" if certfile else "http"
        self.url = f"{self.scheme}://127.0.0.1:{self.port}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index():
    served = Index()
    yield served
    served.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """:data:`TEST_CERTIFICATE` in a file (certificate and key: the server's chain and the CA bundle)."""
    path = tmp_path_factory.mktemp("tls") / "test-127.0.0.1.pem"
    path.write_text(TEST_CERTIFICATE)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An environment of no pip settings but the test's: HOME, XDG folders and the proxies (a closed
    local port for all but 127.0.0.1) are the test's own; no PIP_* variable."""
    for name in list(os.environ):
        if name.startswith("PIP_") or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    nowhere = f"http://127.0.0.1:{closed_port()}"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, nowhere)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("FAKE_PIP_RECORD", str(tmp_path / "pip-ran"))
    return home


def run_main(tmp_path: Path) -> int:
    """bootstrap_pip's main with /etc and the environment's prefix moved into ``tmp_path``."""
    return _bootstrap_module().main(os.environ, prefix=str(tmp_path / "venv"), etc=str(tmp_path / "etc"))


def run_script(tmp_path: Path) -> subprocess.CompletedProcess:
    """The script itself, as scripts/setup.sh runs it (reads this machine's /etc/pip.conf too)."""
    return subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)


def installed(tmp_path: Path) -> str:
    record = tmp_path / "pip-ran"
    return record.read_text() if record.exists() else ""


def one_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def write_conf(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


#: where pip reads a pip.conf (relative to the test's folder, HOME = home/)
PLACES = {
    "/etc/xdg/pip/pip.conf": "xdg/pip/pip.conf",
    "/etc/pip.conf": "etc/pip.conf",
    "~/.pip/pip.conf": "home/.pip/pip.conf",
    "~/.config/pip/pip.conf": "home/.config/pip/pip.conf",
    "the environment's pip.conf": "venv/pip.conf",
    "$PIP_CONFIG_FILE": "elsewhere/pip.conf",
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_the_index_is_read_from_each_pip_conf_and_install_overrides_global(place, tmp_path, home, index,
                                                                          monkeypatch):
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    conf = write_conf(tmp_path / PLACES[place], f"[global]\nindex-url = {dead}\ntimeout = 5\n\n"
                                                f"[install]\nindex-url = {index.url}/\n")
    if place == "$PIP_CONFIG_FILE":
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert run_main(tmp_path) == 0
    assert index.seen == ["GET /simple/pip/", f"GET /packages/{WHEEL_NAME}"]
    assert installed(tmp_path).startswith("install -q --no-index ") and installed(tmp_path).endswith(WHEEL_NAME)


def test_later_files_and_then_the_environment_override_earlier_ones(tmp_path, home, index, monkeypatch):
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    write_conf(tmp_path / "etc/pip.conf", f"[global]\nindex-url = {index.url}\n")
    write_conf(tmp_path / "home/.config/pip/pip.conf", f"[global]\nindex-url = {dead}\n")
    assert run_main(tmp_path) == 1  # the user's file is read after /etc/pip.conf
    assert index.seen == []
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    assert run_main(tmp_path) == 0
    assert index.seen == ["GET /simple/pip/", f"GET /packages/{WHEEL_NAME}"]
    # a PIP_CONFIG_FILE that exists hides the user's files, as in pip
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(write_conf(tmp_path / "site.conf", "[global]\ntimeout = 5\n")))
    assert run_main(tmp_path) == 0
    settings = _bootstrap_module().pip_settings(os.environ, str(tmp_path / "venv"), str(tmp_path / "etc"))
    assert settings.index_url == index.url and settings.timeout == 5.0
    assert settings.origin["index-url"] == f"{tmp_path / 'etc/pip.conf'} [global]"


def test_the_cert_of_pip_conf_checks_the_index_and_without_it_one_line_says_to_set_it(tmp_path, home, certificate,
                                                                                      monkeypatch):
    index = Index(certfile=certificate)
    try:
        conf = write_conf(tmp_path / "pip.conf", f"[global]\nindex-url = {index.url}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        run = run_script(tmp_path)
        line = one_line(run)
        assert line.startswith(f"bootstrap_pip: cannot fetch {index.url}/pip/ from the package index (index-url from "
                               f"{conf} [global]): [SSL: CERTIFICATE_VERIFY_FAILED]"), line
        assert "set cert in pip.conf or PIP_CERT" in line and "trusted-host" in line
        assert index.seen == [] and installed(tmp_path) == ""
        conf.write_text(f"[global]\nindex-url = {index.url}\n[install]\ncert = {certificate}\n")
        run = run_script(tmp_path)
        assert run.returncode == 0, run.stderr
        assert index.seen == ["GET /simple/pip/", f"GET /packages/{WHEEL_NAME}"]
        assert installed(tmp_path).endswith(WHEEL_NAME)
    finally:
        index.close()


@pytest.mark.parametrize("where", ["pip.conf", "PIP_TRUSTED_HOST"])
def test_a_trusted_host_is_reached_without_a_certificate_check(where, tmp_path, home, certificate, monkeypatch):
    index = Index(certfile=certificate)
    try:
        text = f"[global]\nindex-url = {index.url}\n"
        if where == "pip.conf":
            text += f"trusted-host =\n    pypi.org\n    127.0.0.1:{index.port}\n"
        else:
            monkeypatch.setenv("PIP_TRUSTED_HOST", "pypi.org 127.0.0.1")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(write_conf(tmp_path / "pip.conf", text)))
        run = run_script(tmp_path)
        assert run.returncode == 0, run.stderr
        assert index.seen == ["GET /simple/pip/", f"GET /packages/{WHEEL_NAME}"]
    finally:
        index.close()


@pytest.mark.parametrize("where", ["https_proxy", "proxy in pip.conf"])
def test_the_index_is_reached_through_the_proxy(where, tmp_path, home, certificate, monkeypatch):
    upstream = Index(certfile=certificate)
    proxy = Index()
    proxy.tunnel_to = ("127.0.0.1", upstream.port)
    try:
        # the index's host name resolves nowhere: only the proxy can reach it
        url = f"https://pypi.mirror.invalid:{upstream.port}/simple"
        text = f"[global]\nindex-url = {url}\ntrusted-host = pypi.mirror.invalid\n"
        monkeypatch.setenv("no_proxy", "")
        monkeypatch.setenv("NO_PROXY", "")
        if where == "https_proxy":
            monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{proxy.port}")
            monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        else:
            text += f"proxy = http://127.0.0.1:{proxy.port}\n"
        monkeypatch.setenv("PIP_CONFIG_FILE", str(write_conf(tmp_path / "pip.conf", text)))
        run = run_script(tmp_path)
        assert run.returncode == 0, run.stderr
        assert proxy.seen == [f"CONNECT pypi.mirror.invalid:{upstream.port}"] * 2
        assert upstream.seen == ["GET /simple/pip/", f"GET /packages/{WHEEL_NAME}"]
    finally:
        upstream.close()
        proxy.close()


def test_a_plain_http_proxy_is_used_for_an_http_index(tmp_path, home, monkeypatch):
    proxy = Index()
    try:
        conf = write_conf(tmp_path / "pip.conf", "[global]\nindex-url = http://pypi.mirror.invalid/simple\n"
                                                 f"proxy = http://127.0.0.1:{proxy.port}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        assert run_main(tmp_path) == 0
        assert proxy.seen == ["GET http://pypi.mirror.invalid/simple/pip/",
                              f"GET http://pypi.mirror.invalid/packages/{WHEEL_NAME}"]
    finally:
        proxy.close()


def test_each_failure_is_one_line_naming_what_to_set(tmp_path, home, monkeypatch):
    # an index that does not answer: the setting and the file it came from
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    conf = write_conf(tmp_path / "pip.conf", f"[install]\nindex-url = {dead}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    line = one_line(run_script(tmp_path))
    assert line.startswith(f"bootstrap_pip: cannot fetch {dead}/pip/ from the package index (index-url from {conf} "
                           "[install]): [Errno 111] Connection refused; set index-url"), line
    assert "PIP_INDEX_URL" in line and "https_proxy" in line
    # a pip.conf that is not one
    conf.write_text("index-url = https://example.invalid/simple\n")
    line = one_line(run_script(tmp_path))
    assert line.startswith(f"bootstrap_pip: cannot read pip's configuration file {conf}: File contains no section "
                           "headers."), line
    # a cert that is not there
    conf.write_text(f"[global]\ncert = {tmp_path / 'no-such-ca.pem'}\n")
    line = one_line(run_script(tmp_path))
    assert line == (f"bootstrap_pip: cert from {conf} [global] names {tmp_path / 'no-such-ca.pem'}, which does not "
                    "exist; set cert in pip.conf or PIP_CERT to the CA bundle that signs the index's certificate")
    # a timeout that is not a number
    monkeypatch.setenv("PIP_TIMEOUT", "soon")
    conf.write_text("[global]\n")
    line = one_line(run_script(tmp_path))
    assert line == "bootstrap_pip: timeout from PIP_TIMEOUT is 'soon', not a number of seconds"


def test_an_index_without_pip_or_with_a_wrong_digest_is_one_line(tmp_path, home, monkeypatch):
    wrong = Index(digest="0" * 64)
    try:
        monkeypatch.setenv("PIP_INDEX_URL", wrong.url)
        line = one_line(run_script(tmp_path))
        assert line == (f"bootstrap_pip: http://127.0.0.1:{wrong.port}/packages/{WHEEL_NAME} does not match the "
                        f"index's sha256 {'0' * 64}")
        monkeypatch.setenv("PIP_INDEX_URL", wrong.url.replace("/simple", "/nothing"))
        line = one_line(run_script(tmp_path))
        assert line.startswith(f"bootstrap_pip: the package index (index-url from PIP_INDEX_URL) answered 404 "), line
        assert installed(tmp_path) == ""
    finally:
        wrong.close()
