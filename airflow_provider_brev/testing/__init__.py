"""Offline Brev simulator for tests, benchmarks and demos (imports no Airflow; the fake TAO parses specs with PyYAML).

* :class:`BrevSimulator` -- installs a fake ``brev`` executable plus its state under a directory.
* :func:`make_token` -- a JWT the fake ``brev login --token`` accepts.
* A fake ``docker`` and fake TAO entrypoints inside instance sandboxes (:mod:`.fake_docker`,
  :mod:`.fake_tao`), tuned with ``BrevSimulator.set_docker(...)`` / ``set_tao(...)``.
* pytest fixtures ``brev_sim``, ``brev_sim_both``, ``brev_sim_profile``, ``lepton_fake``, ``brev_s3`` and
  ``brev_s3_server`` (see :mod:`.pytest_plugin`; the local S3 is :mod:`.local_s3`).

Names are resolved lazily so that importing this package (e.g. by the pytest plugin or by
``python -m airflow_provider_brev.testing.simulator``) costs nothing.
"""

from __future__ import annotations

# Not ``typing``: the fake ``brev``, ``ssh`` and ``docker`` import this package on every call (``python -IS``, no
# ``site``), and importing typing was most of their start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from airflow_provider_brev.testing.simulator import (
        DEFAULT_ACCOUNTS,
        DEFAULT_CATALOG,
        DEFAULT_DOCKER_CONFIG,
        DEFAULT_TAO_CONFIG,
        DEFAULT_TIMINGS,
        FAULT_KINDS,
        PROFILES,
        BrevSimulator,
        make_token,
    )

__all__ = [
    "DEFAULT_ACCOUNTS",
    "DEFAULT_CATALOG",
    "DEFAULT_DOCKER_CONFIG",
    "DEFAULT_TAO_CONFIG",
    "DEFAULT_TIMINGS",
    "FAULT_KINDS",
    "PROFILES",
    "BrevSimulator",
    "make_token",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_provider_brev.testing import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
