"""The pure core: everything this provider decides about the ``brev`` CLI, with no I/O and no Airflow.

By topic, each a sub-package with its own import-linter contract (pyproject.toml), from the bottom up:

* :mod:`~airflow_provider_brev.core.values` -- checks of rendered parameter values (numbers, booleans, text);
* :mod:`~airflow_provider_brev.core.secrets` -- what printed-secret redaction hides, for every compute;
* :mod:`~airflow_provider_brev.core.protocol` -- one ``brev`` call: its argv, the call protocol, what its output means
  (classification, listings, search), the connection's config, instance names;
* :mod:`~airflow_provider_brev.core.instances` -- an instance's identity (its id), readiness and recovery;
* :mod:`~airflow_provider_brev.core.jobs` -- detached remote jobs: handles, scripts, polls, following, which try's job
  a try follows, the foreground wrapper and its secret redaction filter;
* :mod:`~airflow_provider_brev.core.staging` -- S3 <-> instance transfers: paths, manifests, rounds, scripts,
  reports, S3 locations;
* :mod:`~airflow_provider_brev.core.tao` -- NVIDIA TAO: its command, its report and verdict, checkpoints;
* :mod:`~airflow_provider_brev.core.validation` -- the checks of parameters that name Brev's and S3's things.

The drivers that do the I/O are the hooks (:mod:`airflow_provider_brev.hooks`) and the triggers.
"""
