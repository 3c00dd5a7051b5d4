"""``airflow brev ...``: the provider's Airflow CLI commands (Airflow 3.2+, the ``cli`` entry of provider info).

:mod:`.definition` declares them and imports nothing heavy (every ``airflow`` command loads it);
:mod:`.brev_command` runs them and is imported only when one of them runs.
"""
