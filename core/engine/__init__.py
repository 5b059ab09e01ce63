"""The local engine: a single-machine batch server (store, server, executor, client API).

See docs/engine.md. It imports the kernel and the scheduler library, never a plugin.
"""
