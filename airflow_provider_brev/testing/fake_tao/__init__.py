"""Fake NVIDIA TAO Toolkit entrypoints for the Brev simulator's fake containers (PyYAML parses spec files).

``BrevSimulator.install()`` writes launchers (for :func:`.actions.main`) for ``visual_changenet`` (``-pyt`` images) and ``gap_analysis``
(data-services images) into ``<root>/tools/container-bin``, which is on the PATH of processes that the
fake ``docker run`` starts (and of nothing else: a provider that forgets ``docker run`` gets
``command not found``). They follow ``nvidia_tao_pytorch/core/entrypoint.py``:

* ``<task> <action> -e <spec> [key=value ...]``; no ``-e`` -> ``ERROR: The subtask `train` requires the
  following argument: -e/--experiment_spec_file`` and exit 1; a missing spec file -> ``ERROR: The
  indicated experiment spec file `...` doesn't exist!`` and exit 1.
* The spec is YAML (PyYAML's safe loader; JSON is YAML too) with OmegaConf's ``${a.b}`` interpolation and
  ``???`` = mandatory; Hydra-style ``key=value`` overrides (dotted keys,
  ``+key``/``~key``) win over it.
* Results go to ``<action>.results_dir`` or ``<results_dir>/<action>/`` (``gap_analysis``: ``results_dir``
  itself). ``status.json`` there gets JSON lines (``date``, ``time``, ``status`` STARTED / RUNNING /
  SUCCESS / FAILURE, ``verbosity``, ``message``, ``kpi``, training ``epoch``/``max_epoch``...), appended
  across runs like TAO's ``StatusLogger``.
* Output goes to stdout only (the real entrypoint merges the trainer's stderr), ending with
  ``... [TAO Toolkit] [INFO] root: Execution status: PASS`` (exit 0) or ``... [WARNING] ...: Execution
  status: FAIL`` (exit 1). Progress bars are ``\\r`` updates; every epoch ends with a line
  ``Epoch <e+1>/<N> - train_loss: ... - val_loss: ...``.

Knobs (``BrevSimulator.set_tao(...)``, stored under ``config.json["tao"]``): see :data:`DEFAULT_TAO_CONFIG`.
Every run is recorded in ``<root>/tao_runs.jsonl`` (``start`` and ``end`` lines sharing ``run_id``).
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_tao.spec import DEFAULT_TAO_CONFIG, NETWORK_ACTIONS, RUNS_FILE

__all__ = ["DEFAULT_TAO_CONFIG", "NETWORK_ACTIONS", "RUNS_FILE"]
