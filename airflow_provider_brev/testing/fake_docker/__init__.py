"""A fake ``docker`` client + daemon for the Brev simulator's instance sandboxes (stdlib only).

``BrevSimulator.install()`` puts a launcher for :func:`.commands.main` at ``<root>/tools/bin/docker``, which is on
the PATH of every command ``brev exec`` runs. The "daemon" state is per instance, under
``<root>/instances/<id>/docker/`` (``images.json``, ``containers/<id>/``, ``volumes/``); login state is
the client's ``~/.docker/config.json`` (``$DOCKER_CONFIG`` / ``--config`` honoured) and never holds a key.

Containers are real child processes. ``docker run`` maps container paths to host paths through the
``-v``/``--mount`` binds: every command argument, ``-w`` and ``-e`` value that names a path under a
mounted container path (at a word boundary, also inside ``bash -c`` scripts and ``key=/path``
overrides) is rewritten to the host path, and the mount table is handed to the fake TAO entrypoints
(``$BREV_SIM_CONTAINER_MOUNTS``) so paths inside spec files resolve too. Paths outside every mount land
in the container's private root (``containers/<id>/rootfs``) and vanish with ``--rm``, like in Docker.
The container process runs under a detached "shim" (own session) writing to log files; the client
streams them and proxies signals (``--sig-proxy``); killing the client does not kill the container.
Only what the provider sends is simulated: ``info``, ``login``, ``pull`` and ``run``.

Every invocation is appended to ``<root>/docker_calls.jsonl`` (a ``start`` and an ``end`` line with the
same ``call_id``), with ``-e K=V`` values and ``-p/--password`` values redacted; the flags
``inline_env_values`` and ``password_on_argv`` say whether any was given.

Knobs (``BrevSimulator.set_docker(...)``, stored under ``config.json["docker"]``): see
:data:`DEFAULT_DOCKER_CONFIG`.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_docker.client import CALLS_FILE, DEFAULT_DOCKER_CONFIG

__all__ = ["CALLS_FILE", "DEFAULT_DOCKER_CONFIG"]
