"""What runs on an instance or in a job's container, shipped as package data and read with
:mod:`importlib.resources`: the bash scripts (``*.sh``, rendered by
:mod:`airflow_provider_brev.core.protocol.remote_scripts`) and the Lepton job's agent (``lepton_agent.py``, run as
``python3 -c <source>`` by :mod:`airflow_provider_brev.core.lepton.agent`). Nothing here is imported by the provider.
"""
