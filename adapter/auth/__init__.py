"""Delegated authentication and authorization, as k8s.io/apiserver-based aggregated servers do it.

The adapter server wires it in three places (see security.py for the lines):

    flags         add_auth_flags in the flag groups; auth_options_from_namespace(ns) validates them
    start-up      security = Security(options); await security.start()
    serving       AdapterDaemon(..., middlewares=[security.middleware], tls_hooks=[security.configure_tls])
"""

from adapter.auth.flags import AuthOptions, add_auth_flags, auth_options_from_namespace
from adapter.auth.security import Security, SecurityStartupError

__all__ = ["AuthOptions", "Security", "SecurityStartupError", "add_auth_flags", "auth_options_from_namespace"]
