"""The system-test DAGs (run against real Brev by tests/system/test_system_dags.py); a package, as Airflow's
own system tests are."""
