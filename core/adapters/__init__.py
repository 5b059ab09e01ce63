"""Adapters: the same plugins, unchanged, inside real batch systems.

pbsplug never grows a multi-host protocol of its own (ARCHITECTURE.md): across machines, PBS
or Slurm is the engine, and an adapter puts the site's enabled plugins into it.

- `pbs`: ``pbsplug pbs install|uninstall|status`` puts each plugin into a running OpenPBS /
  PBS Professional server as one site hook (`pbs_hook` is the script PBS runs, `pbs_bridge`
  turns PBS's event into pbsplug's and the outcome back).
"""
