"""`surge simulate`: what-if replays of a load series through the autoscaler's algorithm.

`replay` and `summary` are pure (a series, a profile and the workload's settings in, a timeline and its
figures out); the series readers, the spec loader, the outputs and the plot do the I/O around them.
"""
