"""Base class of the Brev operators."""

from __future__ import annotations

from airflow_provider_brev._compat import BaseOperator
from airflow_provider_brev.utils.mixins import BrevBaseHookMixin, brev_template_fields


class BrevBaseOperator(BrevBaseHookMixin, BaseOperator):
    """Base of every Brev operator: ``brev_conn_id``, templating and a lazily built ``hook``.

    :param brev_conn_id: the Airflow connection id of type ``brev`` (default ``brev_default``).
    """

    template_fields = brev_template_fields()
    ui_color = "#76b900"  # NVIDIA green
