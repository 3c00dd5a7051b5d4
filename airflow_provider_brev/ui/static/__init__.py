"""Package data of the Brev page: its navigation icon (``brev.svg``), served by :mod:`airflow_provider_brev.ui.app`."""
