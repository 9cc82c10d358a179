"""The multiplexer: Surge as the one server registered for custom.metrics.k8s.io and
external.metrics.k8s.io, forwarding the metrics it does not serve to other metrics servers (delegates),
such as KEDA's.

    options.py   the --delegate-* flags and the `URL;groups=...;fallback` form of a delegate
    listing.py   a delegate's discovery documents read, and merged with Surge's (pure)
    client.py    HTTP to one delegate, with Surge's own credentials
    router.py    which server answers a request, discovery refreshes, forwarding
    middleware.py  the aiohttp side: merged discovery lists and forwarded reads
"""
