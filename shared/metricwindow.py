"""The metrics-API contract for short-window reads (burst mode): a client asks for a metric over a
window by adding the requirement `surge.dev/window=<Go duration>` to the metric's own selector; Surge's
adapter strips it and renders the rule over that window (docs/deploy.md, section 12)."""

WINDOW_LABEL = "surge.dev/window"
