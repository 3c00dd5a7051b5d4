"""The Brev page of the Airflow UI, its pure rules: what the page shows, shaped from what the provider recorded.

:mod:`.facts` holds the plain values the I/O half (:mod:`airflow_provider_brev.ui.sources`) reads from the metadata
database; :mod:`.fleet` decides which recorded instances still bill and shapes the fleet and the warm pool,
:mod:`.history` each DAG run's bill. How they look (HTML, inline SVG) is :mod:`airflow_provider_brev.ui.page`.
"""
