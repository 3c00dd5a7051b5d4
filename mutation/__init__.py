"""Mutation testing of the pure core (``airflow_provider_brev/cli/``): ``make mutation``, see ``mutation/README.md``."""
