"""Serving an aiohttp application as both daemons do: the flags (options.py), TLS with certificate reloads
or a self-signed pair (tls.py), and the listener with its connection limits (listener.py)."""
