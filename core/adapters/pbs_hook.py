# pbsplug's hook script for PBS, written by `pbsplug pbs install`: do not edit.
#
# PBS runs it in its own interpreter (no site-packages, PYTHONPATH ignored, -OO), inside the
# server for server events and in a fresh pbs_python per event on the execution hosts. The
# hook's config file (imported with the script) names the environment pbsplug is installed
# in and the plugin to run; everything else is pbsplug.adapters.pbs_bridge's.
import json
import site

import pbs


def _pbsplug_hook():
    path = pbs.hook_config_filename
    if not path:
        raise RuntimeError("pbsplug: this hook has no config file; run 'pbsplug pbs install'")
    with open(path) as fh:
        config = json.load(fh)
    for directory in config["site_dirs"]:
        site.addsitedir(directory)
    from pbsplug.adapters.pbs_bridge import run

    run(pbs, config)


_pbsplug_hook()
