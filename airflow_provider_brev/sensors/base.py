"""Base class of the Brev sensors."""

from __future__ import annotations

from typing import Any

from airflow_provider_brev._compat import BaseSensorOperator
from airflow_provider_brev.core.protocol.config import DEFAULT_BREV_CONN_ID
from airflow_provider_brev.utils.mixins import BrevBaseHookMixin, brev_template_fields


class BrevBaseSensor(BrevBaseHookMixin, BaseSensorOperator):
    """Base of every Brev sensor: ``brev_conn_id``, templating and a lazily built ``hook``.

    :param brev_conn_id: the Airflow connection id of type ``brev`` (default ``brev_default``).
    """

    template_fields = brev_template_fields()
    ui_color = "#76b900"

    def __init__(self, *, brev_conn_id: str = DEFAULT_BREV_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.brev_conn_id = brev_conn_id
