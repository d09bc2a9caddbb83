"""Optional TLS for the wire (`--tls-cert`, `--tls-key`, `--tls-ca`), with the standard library's `ssl`.

The server presents its certificate (`--tls-cert`, `--tls-key`); with `--tls-ca` it also requires each client
to present one signed by that CA. A client turns TLS on with `--tls-ca` (the CA that signed the server's
certificate, whose name or IP address must match `--connect`'s host) and presents its own certificate with
`--tls-cert`/`--tls-key` where the server asks for one. The secret's proofs then run inside TLS, so the
tensors are encrypted, and a process without the server's certificate key cannot stand in for it even where
the client was pointed at it.
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from vfl.errors import SplitlabError
from vfl.files import read_bounded

MAX_PEM_BYTES = 1 << 20


@dataclass(frozen=True)
class TlsFiles:
    """The TLS options of one side (all None: no TLS)."""
    cert: str | None = None
    key: str | None = None
    ca: str | None = None

    @property
    def enabled(self) -> bool:
        return any((self.cert, self.key, self.ca))


def _pem(path: str, flag: str, private: bool = False) -> str:
    """`path` checked before OpenSSL opens it: a regular file of at most 1 MiB (a FIFO would block OpenSSL);
    a private key only its owner can read."""
    read_bounded(path, limit=MAX_PEM_BYTES, what=flag)
    if private and os.stat(path).st_mode & 0o077:
        raise SplitlabError(f"{flag} {path} can be read or written by others (mode {os.stat(path).st_mode & 0o777:o}); "
                            f"`chmod 600 {path}`")
    return path


def _load_chain(context: ssl.SSLContext, files: TlsFiles) -> None:
    if bool(files.cert) != bool(files.key):
        raise SplitlabError("--tls-cert and --tls-key go together (a certificate and its private key)")
    if files.cert:
        try:
            context.load_cert_chain(_pem(files.cert, "--tls-cert"), _pem(files.key, "--tls-key", private=True))
        except ssl.SSLError as exc:
            raise SplitlabError(f"--tls-cert {files.cert} with --tls-key {files.key}: not a PEM certificate and its "
                                f"key ({exc.reason or exc})") from None


def _load_ca(context: ssl.SSLContext, files: TlsFiles) -> None:
    try:
        context.load_verify_locations(_pem(files.ca, "--tls-ca"))
    except ssl.SSLError as exc:
        raise SplitlabError(f"--tls-ca {files.ca}: not a PEM certificate ({exc.reason or exc})") from None


def server_context(files: TlsFiles) -> ssl.SSLContext | None:
    """The server's TLS context, or None without TLS options. Errors are one line."""
    if not files.enabled:
        return None
    if not files.cert:
        raise SplitlabError("--tls-ca on the server asks clients for certificates; it needs the server's own "
                            "--tls-cert and --tls-key too")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, files)
    if files.ca:
        _load_ca(context, files)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(files: TlsFiles) -> ssl.SSLContext | None:
    """A client's TLS context (it verifies the server's certificate and name), or None without TLS options."""
    if not files.enabled:
        return None
    if not files.ca:
        raise SplitlabError("a client uses TLS with --tls-ca (the CA that signed the server's certificate); "
                            "--tls-cert and --tls-key alone cannot check the server")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)         # verifies the certificate and the host name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_ca(context, files)
    _load_chain(context, files)
    return context


def self_signed(folder, host: str = "127.0.0.1") -> TlsFiles:
    """A throwaway self-signed certificate for `host` (an IP address) in `folder`, its own CA: for the tests
    and `scripts/bench_wire.py` on loopback. Needs the `openssl` program; a one-line error without it."""
    import shutil
    import subprocess
    from pathlib import Path

    openssl = shutil.which("openssl")
    if openssl is None:
        raise SplitlabError("a self-signed certificate needs the `openssl` program, which is not on PATH")
    cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
    done = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                           "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={host}",
                           "-addext", f"subjectAltName=IP:{host}"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SplitlabError(f"openssl could not make a certificate ({(done.stderr.strip().splitlines() or ['?'])[-1]})")
    key.chmod(0o600)
    return TlsFiles(str(cert), str(key), str(cert))
