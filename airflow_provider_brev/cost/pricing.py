"""The price per hour of an instance type, for the cost report (:mod:`airflow_provider_brev.core.cost`).

The hook remembers the prices of every ``brev search`` it ran (``known_prices`` of
:class:`~airflow_provider_brev.hooks.instances.BrevInstancesHook`): creating an instance searched its candidates
already, so pricing it costs no call.
Only an instance the task did not create (or adopted) may need one more ``brev search`` (no login needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    from airflow_provider_brev.hooks.brev import BrevHook


def price_of(hook: BrevHook, instance_type: str | None) -> float | None:
    """The price per hour of ``instance_type`` (``None`` when no type is known or ``brev search`` lists none).

    :param hook: the task's hook (its remembered prices are used first).
    :param instance_type: the type ``brev ls`` lists for the instance.
    """
    if not instance_type:
        return None
    prices = hook.known_prices
    if instance_type not in prices:
        try:
            hook.search_instance_types()
            if instance_type not in prices:
                hook.search_instance_types(include_cpu=True)
        except BrevError as err:  # a report is not worth failing the task for
            hook.log.warning("Could not read the price of %s from `brev search` (%s).", instance_type, err)
    return prices.get(instance_type)
