"""Apache Airflow provider for NVIDIA Brev GPU instances.

Importing this package is deliberately cheap (no Airflow import): the Brev simulator in
:mod:`airflow_provider_brev.testing` and the provider-discovery entry point both load it.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
