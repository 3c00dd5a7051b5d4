"""Shared constructor arguments, templating and hook construction of every Brev operator and sensor.

Modelled on the Amazon provider's ``AwsBaseHookMixin``: one place defines ``brev_conn_id`` and the lazily built
:class:`~airflow_provider_brev.hooks.brev.BrevHook`, so operators stay thin.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.hooks.brev import BrevHook

if TYPE_CHECKING:
    from collections.abc import Sequence


def brev_template_fields(*template_fields: str) -> tuple[str, ...]:
    """Template fields of a Brev operator: always ``brev_conn_id``, plus the given ones (sorted, unique)."""
    return tuple(sorted({"brev_conn_id", *template_fields}))


class BrevBaseHookMixin:
    """Mixin giving an operator/sensor ``brev_conn_id`` and a lazily built ``hook``.

    The hook is never built in ``__init__`` (DAG parsing must not touch connections or run ``brev``).

    :param brev_conn_id: the Airflow connection id of type ``brev`` (default ``brev_default``).
    """

    hook_class: type[BrevHook] = BrevHook
    template_fields: Sequence[str] = brev_template_fields()

    def __init__(self, *, brev_conn_id: str = BrevHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.brev_conn_id = brev_conn_id

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        """Keyword arguments of the hook; subclasses extend it."""
        return {"brev_conn_id": self.brev_conn_id}

    @cached_property
    def hook(self) -> BrevHook:
        return self.hook_class(**self._hook_parameters)
