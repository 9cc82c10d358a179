"""The adapter's HTTP(S) server: routes, bodies, errors, health, self-metrics, TLS, and the daemon wiring.

`app.make_app` builds the aiohttp application (usable in-process); `daemon.AdapterDaemon` runs the whole
adapter (what `python -m adapter` starts). Import the submodules directly.
"""
