"""Apache Airflow provider for NVIDIA Brev GPU instances.

Importing this package is deliberately cheap (no Airflow import): the Brev simulator in
:mod:`airflow_provider_brev.testing` and the provider-discovery entry point both load it.

``__version__`` is the installed distribution's version (``pyproject.toml`` is the one place it is written),
read from the package metadata on first access; ``get_provider_info()["versions"]`` repeats it and
``tests/unit/project/test_packaging.py`` checks that the three agree.
"""

from __future__ import annotations

_DISTRIBUTION = "airflow-provider-brev"


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - imported from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        value = _installed_version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__"]  # noqa: F822 - module __getattr__ provides it, read lazily
