"""Mutation testing of the pure core (``airflow_provider_brev/core/``): ``make mutation``, see ``mutation/README.md``."""
