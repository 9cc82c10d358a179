"""Client TLS contexts: one function, so every client of the project verifies servers the same way.

A context is built once per server a client talks to (at start-up, so a bad CA or key file is a start-up
error) and shared by all its connections; building one per request or per connection would re-read the
CA bundle each time.
"""

from __future__ import annotations

import ssl


def client_context(
    ca_file: str | None = None,
    *,
    verify: bool = True,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    """Verify the server against `ca_file` (system roots when None) unless `verify` is False; present
    `cert_file`/`key_file` as the client certificate when given. Raises OSError/ssl.SSLError on bad files."""
    context = ssl.create_default_context(cafile=ca_file or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file or None)
    return context
