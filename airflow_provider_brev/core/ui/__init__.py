"""The Brev page of the Airflow UI, its pure half: what the page shows, shaped from what the provider recorded.

:mod:`.facts` holds the plain values the I/O half (:mod:`airflow_provider_brev.ui`) reads from the metadata database;
:mod:`.fleet` shapes the fleet and the warm pool, :mod:`.history` each DAG run's bill; :mod:`.charts` draws the
cost history as inline SVG and :mod:`.page` writes the page (HTML, no script, nothing loaded from anywhere).
"""
