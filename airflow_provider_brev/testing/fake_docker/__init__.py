"""A fake ``docker`` for the Brev simulator's instance sandboxes (stdlib only): ``info``, ``login``, ``pull`` and a
foreground ``run``, the commands the provider sends.

``BrevSimulator.install()`` puts a launcher for :func:`.commands.main` at ``<root>/tools/bin/docker``, on the PATH
of every command ``brev exec`` runs. Per-instance state lives under ``<root>/instances/<id>/docker/``
(``images.json``, ``containers/<id>/rootfs``); registry logins in the client's ``~/.docker/config.json``
(``$DOCKER_CONFIG`` / ``--config``), which never holds a key. Every invocation is appended to
``<root>/docker_calls.jsonl`` (``start``/``end`` lines sharing ``call_id``) with ``-e K=V`` and ``-p`` values
redacted; ``inline_env_values`` and ``password_on_argv`` say whether any was given. Knobs
(``BrevSimulator.set_docker``): :data:`DEFAULT_DOCKER_CONFIG`.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_docker.client import CALLS_FILE, DEFAULT_DOCKER_CONFIG

__all__ = ["CALLS_FILE", "DEFAULT_DOCKER_CONFIG"]
