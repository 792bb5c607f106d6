"""Agents and a team's own services in containers, through the docker SDK (docs/containers.md).

``engine``: the one client, our labels, starting and removing containers, cleanup of ours (the reaper);
``images``: the images the harness builds itself (base, runtime, harness), never pulled.

Importing this package imports no ``docker``: only a run that uses a container pays for it.
"""
