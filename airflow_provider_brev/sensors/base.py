"""Base class of the Brev sensors."""

from __future__ import annotations

from airflow_provider_brev._compat import BaseSensorOperator
from airflow_provider_brev.utils.mixins import BrevConnectionParams


class BrevBaseSensor(BrevConnectionParams, BaseSensorOperator):
    """Base of every Brev sensor: the Brev connection (:class:`~airflow_provider_brev.utils.mixins.BrevConnectionParams`:
    ``brev_conn_id``, templated, and a lazily built ``hook``)."""

    ui_color = "#76b900"
