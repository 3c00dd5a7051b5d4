"""OpenLineage: the S3 data every step and transfer reads and writes, as lineage datasets.

The OpenLineage provider (``apache-airflow-providers-openlineage``) calls an operator's
``get_openlineage_facets_on_start`` when the task starts and ``get_openlineage_facets_on_complete`` when it ends
(also on failure, when there is no ``..._on_failure``), on the task whose template fields are rendered, as it does for
the Amazon, Google and Databricks operators. This provider does not need OpenLineage: both methods import it inside
the call and return ``None`` when it is not installed (the OpenLineage provider is then not there to call them either).

The datasets are S3 only, named by :mod:`airflow_provider_brev.core.staging.lineage`. Directories on an instance are
not datasets: an instance lives for a run (its name is new every run), so each run would add datasets that nothing
else reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.lineage import s3_datasets

if TYPE_CHECKING:
    from collections.abc import Iterable


def operator_lineage(inputs: Iterable[Any], outputs: Iterable[Any]) -> Any:
    """An ``OperatorLineage`` with the S3 datasets of ``inputs`` and ``outputs`` (URIs), or ``None`` when the
    OpenLineage provider is not installed."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    return OperatorLineage(
        inputs=[Dataset(namespace=namespace, name=name) for namespace, name in s3_datasets(inputs)],
        outputs=[Dataset(namespace=namespace, name=name) for namespace, name in s3_datasets(outputs)],
    )


class BrevLineageMixin:
    """``get_openlineage_facets_on_start`` / ``..._on_complete`` from :meth:`lineage_uris`, for the operators that
    move S3 data (the step operators, the transfers)."""

    def lineage_uris(self) -> tuple[list[Any], list[Any]]:
        """The S3 URIs the task reads and those it writes (subclasses; from its rendered parameters)."""
        return [], []

    def get_openlineage_facets_on_start(self) -> Any:
        """What the task will read and write (the OpenLineage provider calls it when the task starts)."""
        inputs, outputs = self.lineage_uris()
        return operator_lineage(inputs, outputs)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """What the task read and wrote (when it ended; the same datasets as at its start).

        :param task_instance: the finished task instance (unused: the datasets are its parameters').
        """
        return self.get_openlineage_facets_on_start()
