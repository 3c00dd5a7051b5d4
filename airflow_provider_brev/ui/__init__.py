"""The Brev page of the Airflow UI: the plugin (:mod:`.plugin`), its web app (:mod:`.app`), what it reads
(:mod:`.sources`) and how it looks (:mod:`.page`, :mod:`.charts`: HTML and inline SVG, pure); which instances bill and
what each run cost is decided in :mod:`airflow_provider_brev.core.ui`."""
