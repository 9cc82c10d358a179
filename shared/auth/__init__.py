"""Delegated authentication and authorization, as k8s.io/apiserver-based servers (aggregated API servers,
kube components' metrics ports) do it: the adapter's and the autoscaler's ports both use it.

A daemon wires it in three places (see security.py for the lines):

    flags         add_auth_flags in the flag groups; auth_options_from_namespace(ns) validates them
    start-up      security = Security(options, user_agent=PROG); serve (health paths pass, the rest
                  get 503 + Retry-After); once the API server answers, await security.start()
    serving       its application gets security.middleware; its serving TLS context security.configure_tls
"""

from shared.auth.flags import AuthOptions, add_auth_flags, auth_options_from_namespace
from shared.auth.security import Security, SecurityStartupError

__all__ = ["AuthOptions", "Security", "SecurityStartupError", "add_auth_flags", "auth_options_from_namespace"]
