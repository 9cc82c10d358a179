"""The `surge` command: tools around the autoscaler, one subcommand a module (`surge simulate`, ...)."""
