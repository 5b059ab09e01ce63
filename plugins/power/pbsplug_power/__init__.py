"""power: ramp-rate limiting and node power on/off (seed 004), work in progress.

This package so far holds the configuration rules (`config`) and the periodic decision
(`decision`); the hooks, the drivers and the commands are not written yet, so it declares no
entry point and no engine loads it.
"""

__version__ = "0.0.1"
