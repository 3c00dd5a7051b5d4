"""Shared constructor arguments, templating and hook construction of every Brev operator and sensor.

Modelled on the Amazon provider's ``AwsBaseHookMixin``: one place defines ``brev_conn_id`` and the lazily built
:class:`~airflow_provider_brev.hooks.brev.BrevHook`, so operators stay thin.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_brev.hooks.brev import BrevHook


def brev_template_fields(*template_fields: str) -> tuple[str, ...]:
    """Template fields of a Brev operator: always ``brev_conn_id``, plus the given ones (sorted, unique)."""
    return tuple(sorted({"brev_conn_id", *template_fields}))


class BrevBaseHookMixin:
    """Mixin giving an operator/sensor a lazily built ``hook`` from its ``brev_conn_id``.

    The hook is never built in ``__init__`` (DAG parsing must not touch connections or run ``brev``). The
    ``brev_conn_id`` argument itself is declared by the ``BaseOperator`` subclasses that use this mixin
    (:class:`~airflow_provider_brev.operators.base.BrevBaseOperator`,
    :class:`~airflow_provider_brev.sensors.base.BrevBaseSensor`): Airflow accepts in ``.partial()``/``.expand()``
    only the arguments of ``BaseOperator`` subclasses' ``__init__`` (as the Amazon provider's ``AwsBaseOperator``).
    """

    #: The hook's class; ``None``: :class:`~airflow_provider_brev.hooks.brev.BrevHook`, imported when the hook is
    #: first built (parsing a DAG imports no hook).
    hook_class: type[BrevHook] | None = None
    template_fields: Sequence[str] = brev_template_fields()
    brev_conn_id: str

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        """Keyword arguments of the hook; subclasses extend it."""
        return {"brev_conn_id": self.brev_conn_id}

    @cached_property
    def hook(self) -> BrevHook:
        hook_class = self.hook_class
        if hook_class is None:
            from airflow_provider_brev.hooks.brev import BrevHook

            hook_class = BrevHook
        return hook_class(**self._hook_parameters)
