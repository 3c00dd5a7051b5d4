"""A fake ``docker`` for the Brev simulator's instance sandboxes (stdlib only): ``run`` (attached or ``-d``),
``inspect``, ``ps``, ``logs``, ``wait``, ``stop``, ``kill``, ``rm``, ``pull``, ``login``, ``images`` and ``info``,
what the provider and other clients of Docker send (the table: docs/simulator.md).

``BrevSimulator.install()`` puts a launcher for :func:`.commands.main` at ``<root>/tools/bin/docker``, on the PATH
of every command ``brev exec`` runs. Per-instance state lives under ``<root>/instances/<id>/docker/``
(``images.json``; ``containers/<id>/``, see :mod:`.containers`), shared by every ``docker`` call on the instance;
registry logins in the client's ``~/.docker/config.json`` (``$DOCKER_CONFIG`` / ``--config``), which never holds
a key. Every invocation is appended to
``<root>/docker_calls.jsonl`` (``start``/``end`` lines sharing ``call_id``) with ``-e K=V`` and ``-p`` values
redacted; ``inline_env_values`` and ``password_on_argv`` say whether any was given. Knobs
(``BrevSimulator.set_docker``): :data:`DEFAULT_DOCKER_CONFIG`.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_docker.client import CALLS_FILE, DEFAULT_DOCKER_CONFIG
from airflow_provider_brev.testing.fake_docker.containers import containers_of

__all__ = ["CALLS_FILE", "DEFAULT_DOCKER_CONFIG", "containers_of"]
