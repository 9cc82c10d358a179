"""Go's `tls.RequestClientCert` for Python's ssl: ask for a client certificate and accept whatever comes.

k8s.io/apiserver serves with RequestClientCert (server/secure_serving.go): the handshake asks for a
certificate but verifies nothing, and each authenticator verifies the presented chain per request against
its own CA (request/x509/x509.go). A certificate no CA vouches for thus costs the request that certificate,
not the connection: a bearer token on the same request still authenticates it, and with nothing else the
request gets a 401 Status.

Python's ssl cannot say this: `CERT_OPTIONAL` has OpenSSL verify a presented chain against the loaded CAs
and abort the handshake when it does not verify, and the ssl module exposes no verify callback. So one is
installed with ctypes on the SSL_CTX an `ssl.SSLContext` wraps; it accepts every chain. OpenSSL still makes
the client prove it holds the certificate's key (CertificateVerify): only the chain-of-trust verdict moves
to the authenticators (certs.py), as in Go.
"""

from __future__ import annotations

import _ssl
import ctypes
import functools
import ssl

_SSL_VERIFY_PEER = 0x01  # without SSL_VERIFY_FAIL_IF_NO_PEER_CERT: a client may send no certificate

# int (*verify_callback)(int preverify_ok, X509_STORE_CTX *ctx)
_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _accept(_preverify_ok: int, _store: int | None) -> int:
    return 1


# Module-level so the C thunk lives as long as any context that points at it (the process).
_ACCEPT_ANY_CHAIN = _VerifyCallback(_accept)


@functools.cache
def _libssl() -> ctypes.CDLL:
    """The libssl `_ssl` is linked against, with the two functions used here typed.

    A symbol looked up through the extension's handle resolves in its dependencies, so this is the very
    library (and version) that owns the SSL_CTX; a `_ssl` built into the interpreter has no file and its
    symbols are the process's own.
    """
    lib = ctypes.CDLL(getattr(_ssl, "__file__", None))
    lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    lib.SSL_CTX_set_verify.restype = None
    return lib


def _ssl_ctx(context: ssl.SSLContext) -> int:
    """The SSL_CTX* behind a context: CPython's PySSLContext holds it first, right after the object header.

    Checked against the context's options (a 64-bit mask Python reads from that same SSL_CTX) before use.
    """
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer or _libssl().SSL_CTX_get_options(pointer) != int(context.options):
        raise RuntimeError("cannot reach the OpenSSL context behind an ssl.SSLContext")
    return pointer


def request_any_client_certificate(context: ssl.SSLContext) -> None:
    """Ask clients for a certificate (not requiring one) and complete the handshake whatever its chain.

    Afterwards `context.verify_mode` reads `CERT_OPTIONAL`; Python keeps the callback if that mode is set
    again. The authenticators must verify every chain themselves.
    """
    _libssl().SSL_CTX_set_verify(_ssl_ctx(context), _SSL_VERIFY_PEER, _ACCEPT_ANY_CHAIN)
