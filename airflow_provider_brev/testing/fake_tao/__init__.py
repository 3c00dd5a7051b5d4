"""Fake NVIDIA TAO Toolkit entrypoints (``visual_changenet`` train/evaluate in ``-pyt`` images, ``gap_analysis``
vcn_aoi in data-services images) that only processes started by the fake ``docker run`` see.

They follow ``nvidia_tao_pytorch/core/entrypoint.py``: ``<task> <action> -e <spec> [key=value ...]``; the YAML spec
(OmegaConf ``${a.b}``, ``???`` = mandatory) with Hydra overrides; results in ``<action>.results_dir`` or
``<results_dir>/<action>/`` (``gap_analysis``: ``results_dir``); ``status.json`` lines appended like TAO's
``StatusLogger``; output on stdout only, ending with ``Execution status: PASS`` (exit 0) or ``FAIL`` (exit 1).
Knobs (``BrevSimulator.set_tao``): :data:`DEFAULT_TAO_CONFIG`. Every run is recorded in ``<root>/tao_runs.jsonl``.
"""

from __future__ import annotations

from airflow_provider_brev.testing.fake_tao.spec import DEFAULT_TAO_CONFIG, NETWORK_ACTIONS, RUNS_FILE

__all__ = ["DEFAULT_TAO_CONFIG", "NETWORK_ACTIONS", "RUNS_FILE"]
