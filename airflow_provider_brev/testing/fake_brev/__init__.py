"""A fake ``brev`` CLI: a file-backed simulator of NVIDIA Brev CLI v0.6.327 (the ``released`` profile) and of
the documented newer CLI (the ``documented`` profile).

:class:`airflow_provider_brev.testing.simulator.BrevSimulator` installs a launcher for :func:`.main.main` as
``<root>/bin/brev``. The state root comes from the launcher (or ``$FAKE_BREV_STATE``) and holds:

* ``config.json``  profile, timings, catalog, accounts and knobs (written by the controller)
* ``state.json``   instances, server-side login sessions, armed faults (guarded by ``state.lock``)
* ``calls.jsonl``  one JSON line per invocation; ``runs.jsonl`` one per command started in a sandbox
* ``instances/<id>/home``  the per-instance sandbox that ``brev exec`` runs commands in

Shared plumbing lives in :mod:`.flags` (CLI errors, flag parsing), :mod:`.context` (one invocation: output,
stdin, credentials, auth, 5xx faults), :mod:`.store` (state under a lock, instance records, faults) and
:mod:`.catalog`; each command group has its own ``cmd_*`` module, and :mod:`.commands` holds the command table.
The modules are stdlib only and cheap to import: the launcher starts them hundreds of times per test run.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_brev.catalog import DEFAULT_CATALOG

__all__ = ["DEFAULT_CATALOG"]
