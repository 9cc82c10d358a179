"""Delegated authentication and authorization, as k8s.io/apiserver-based aggregated servers do it.

The adapter server wires this package in three places:

    parser = build_parser((*FLAG_GROUPS, add_auth_flags))   # flags (adapter/auth/flags.py)
    security = Security(auth_options_from_namespace(ns))     # start-up errors raise FlagError-like ValueError
    await security.start()                                   # reads the front-proxy ConfigMap, opens clients
    ssl_context = security.server_ssl_context(cert_file, key_file)
    app = web.Application(middlewares=[security.middleware, ...])
    ...
    await security.close()
"""

from adapter.auth.flags import AuthOptions, add_auth_flags, auth_options_from_namespace
from adapter.auth.security import Security

__all__ = ["AuthOptions", "Security", "add_auth_flags", "auth_options_from_namespace"]
