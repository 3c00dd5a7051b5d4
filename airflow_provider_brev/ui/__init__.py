"""The Brev page of the Airflow UI: the plugin (:mod:`.plugin`), its web app (:mod:`.app`) and what it reads
(:mod:`.sources`); what the page shows is decided in :mod:`airflow_provider_brev.core.ui`."""
