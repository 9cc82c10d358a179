"""Errors raised while turning discovery rules and requests into PromQL.

The server maps them to HTTP statuses: `InvalidSelectorError` → 400, `MetricNotFoundError` → 404,
`QueryBuildError` → 404 for custom metrics / 500 for external ones (prometheus-adapter's codes).
"""


class NamingError(Exception):
    """Base class of every error of the naming package."""


class InvalidSelectorError(NamingError, ValueError):
    """A request selector cannot be expressed safely in PromQL (bad label key, unsupported operator...)."""


class QueryBuildError(NamingError):
    """The rule's `metricsQuery` could not be rendered for this request."""


class MetricNotFoundError(NamingError, LookupError):
    """No discovered series backs the requested metric (for that resource)."""
