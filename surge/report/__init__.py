"""`surge report`: what Surge, in shadow mode, would have done beside the incumbent autoscaler, read from
Prometheus (issue 35). `analysis` is pure (series in, numbers out), `prometheus` reads the series,
`render` writes text, JSON or one self-contained HTML page, `command` is the subcommand's flags."""
