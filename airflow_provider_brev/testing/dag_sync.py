"""Write every DAG bundle's DAGs (and their assets) to the metadata DB, as Airflow's DAG processor does.

``dag.test()`` alone is not enough on Airflow 3.0: it does not write the DAG's assets, so a task with an asset
outlet fails with ``AirflowInactiveAssetInInletOrOutletException`` (apache/airflow#51644). ``make demo``
(scripts/demo.py) and the test suite's session set-up (tests/conftest.py) call :func:`sync_dag_bundles_to_db`
once after ``initdb()``; afterwards each ``dag.test()`` also knows its DAG's bundle.
"""

from __future__ import annotations

import contextlib
import importlib

__all__ = ["sync_dag_bundles_to_db"]


def sync_dag_bundles_to_db() -> None:
    """Parse every configured DAG bundle and write its DAGs and assets to the metadata DB.

    :raises RuntimeError: a bundle has import errors (named in the message).
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models import DagBag

    sync_bag_to_db = None  # a function since Airflow 3.1 (airflow.models.dagbag), moved in 3.2; a method on 3.0
    for module in ("airflow.dag_processing.dagbag", "airflow.models.dagbag"):
        with contextlib.suppress(ImportError):
            sync_bag_to_db = getattr(importlib.import_module(module), "sync_bag_to_db", None)
        if sync_bag_to_db is not None:
            break
    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bag = DagBag(dag_folder=bundle.path, bundle_path=bundle.path)
        if bag.import_errors:
            raise RuntimeError(f"DAG import errors in bundle {bundle.name}: {bag.import_errors}")
        if sync_bag_to_db is None:
            bag.sync_to_db(bundle.name, None)  # type: ignore[attr-defined]  # Airflow 3.0 only
        else:
            sync_bag_to_db(bag, bundle.name, bundle.version)
