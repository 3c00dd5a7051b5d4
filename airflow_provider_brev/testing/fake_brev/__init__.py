"""A fake ``brev`` CLI: a file-backed simulator of NVIDIA Brev CLI v0.6.327 (the ``released`` profile) and of
the documented newer CLI (the ``documented`` profile).

:class:`airflow_provider_brev.testing.simulator.BrevSimulator` installs a launcher for :func:`.main.main` as
``<root>/bin/brev``. The state root comes from the launcher (or ``$FAKE_BREV_STATE``) and holds:

* ``config.json``  profile, timings, catalog, accounts and knobs (written by the controller)
* ``state.json``   instances, server-side login sessions, armed faults (guarded by ``state.lock``)
* ``calls.jsonl``  one JSON line per invocation; ``runs.jsonl`` one per command started in a sandbox
* ``instances/<id>/home``  the per-instance sandbox that ``brev exec`` runs commands in

Simulated: ``create``, ``ls``, ``delete``, ``exec``, ``copy``, ``login``, ``refresh``, ``search --json``, ``--version``,
``create --help`` and (documented profile) ``orgs``; the CLI's other commands are known but refuse. Plumbing:
:mod:`.flags`, :mod:`.context` (one invocation: output, stdin, credentials, auth, 5xx faults), :mod:`.store`
(state under a lock, instance records, faults), :mod:`.instance_loss` (the ``instance_lost`` fault), :mod:`.catalog`;
:mod:`.commands` holds the command table. Stdlib only and cheap to import: the launcher starts them hundreds of times
per test run.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_brev.catalog import DEFAULT_CATALOG

__all__ = ["DEFAULT_CATALOG"]
