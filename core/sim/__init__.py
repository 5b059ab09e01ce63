"""The simulator: a site's scheduling policy and plugins replayed on a workload trace.

It imports the kernel (and the scheduling library), never a plugin, the engine or an
adapter. Its parts: `records` (what flows between them), `traces` (SWF, PBS accounting and
sacct readers), the engine that replays a trace on a virtual clock, and `output` (metrics,
Batsim CSV files and plots).
"""
