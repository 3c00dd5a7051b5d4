"""The GPU bill of the flagship retraining DAG on a scaled realistic timeline, against the seed recipe.

The realistic timeline (one retraining run): boot 180 s to RUNNING + 60 s until sshd answers, one ~14 GB TAO image
per image used (~200 s each), 10,000 x 50 KB dataset objects from S3, gap analysis 300 s, train 3,600 s, evaluate
300 s. Every **cloud-side** duration of the simulator is divided by one scale factor (``--scale``, 20 by default):
the deploy and sshd times, the image pull time (through the fake docker's ``pull_bytes_per_second``) and the work
(fake TAO ``epoch_seconds`` and ``gap_analysis_seconds``). Host-side work -- staging through S3 (a local moto
server in its own process), ``brev`` processes, Airflow's task overhead -- takes its real time. The provider's runs
are **projected** from their own timeline (``_bill_timeline.py``: every instant of billed time labelled once,
cloud-side intervals stretched back by the scale, host-side ones kept); the seed recipe, serial, adds
(scale - 1) x the nominal cloud-side seconds of boot, pulls and work to what was measured.

Three lifecycles in one session:

1. **provider, fresh run** -- ``dags_examples/tao_visual_changenet_retrain.py`` with ``dag.test()``; its
   ``num_epochs`` param is set so that training is 12 epochs (the fake TAO's train : evaluate take 12 : 1 epochs;
   with 15 s epochs and a 15 s gap analysis at scale 20 that is 180 : 15 : 15 s);
2. **provider, warm second run** -- the same DAG again, warm as the DAG is by default: both runs use its
   ``release="stop"`` with ``reuse_key="bench-bill"`` and ``max_idle_hours=1`` (run params, nothing patched), so
   the second run starts the first run's instance;
3. **seed recipe, extended** -- ``seed_recipe.sh`` (create, poll ``brev exec``, work, delete) whose work command is
   the same steps: ``docker pull`` of both images, ``aws s3 sync`` of the dataset (``bill_aws.py``), ``docker run``
   of the three steps (``sleep`` for the provider's nominal step durations) and ``aws s3 sync`` of the results. It
   runs at the same time as the fresh run, on its own simulator root with the same timings.

Per label (boot, pull, stage, work, upload, setup, launch, detection, delete): the provider's from its timeline
(``_bill_timeline.py``), the seed's from the simulator's records and the work command's timestamps. Non-work share =
1 - work / billed. Dollars
with the instance type's price (``brev search``), as the cost model computes them (``core/cost.py``).

    python benchmarks/bench_bill.py --out result.json [--scale 20 --objects 10000 --object-bytes 50000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _bill_timeline import LABELS
from _common import BENCH_DIR, REPO_ROOT, WORK_DIR, InstanceWatcher, progress, write_json

BASE = WORK_DIR / "bill"
SPANS: list[dict[str, Any]] = []  # every closed cost phase of every task (``_bill_timeline.record_meter_spans``)
REAL = {"deploy": 180.0, "ssh": 60.0, "pull_per_image": 200.0, "gap_analysis": 300.0, "train": 3600.0}
REAL |= {"evaluate": 300.0, "start": 60.0}
IMAGE_BYTES = 14 * 10**9
TRAIN_EPOCHS = 12  # train : evaluate = 12 : 1 epochs of the fake TAO; gap analysis has its own knob
REUSE_KEY = "bench-bill"
CLOUD_PHASES = ("boot", "pull", "work")


def timings(scale: float) -> dict[str, Any]:
    epoch = REAL["train"] / TRAIN_EPOCHS / scale
    gap = REAL["gap_analysis"] / scale
    return {
        "scale": scale,
        "deploy_seconds": REAL["deploy"] / scale,
        "ssh_seconds": REAL["ssh"] / scale,
        "build_seconds": REAL["ssh"] / scale,
        "delete_seconds": 1.0,
        "start_seconds": REAL["start"] / scale,
        "pull_bytes_per_second": IMAGE_BYTES / (REAL["pull_per_image"] / scale),
        "image_bytes": IMAGE_BYTES,
        "epoch_seconds": epoch,
        "gap_analysis_seconds": gap,
        "nominal_work_seconds": {"gap_analysis": gap, "train": epoch * TRAIN_EPOCHS, "evaluate": epoch},
    }


def configure(sim: Any, t: dict[str, Any]) -> None:
    sim.set_timings(deploy=t["deploy_seconds"], ssh=t["ssh_seconds"], build=t["build_seconds"])
    sim.set_timings(delete=t["delete_seconds"], start=t["start_seconds"])
    sim.set_docker(pull_bytes_per_second=t["pull_bytes_per_second"], image_bytes={"*": t["image_bytes"]})
    sim.set_tao(epoch_seconds=t["epoch_seconds"], gap_analysis_seconds=t["gap_analysis_seconds"])


def seed_dataset(bucket: str, prefix: str, objects: int, size: int) -> int:
    """Fill the dataset prefix up to ``objects`` objects with ``size``-byte images the DAG's CSVs do not name."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    client = S3Hook(aws_conn_id="aws_default").get_conn()
    present = sum(p.get("KeyCount", 0) for p in client.get_paginator("list_objects_v2").paginate(Bucket=bucket))
    body = bytes(size)

    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}images/extra/obj_{i:05d}.jpg", Body=body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(max(objects - present, 0))))
    return max(objects, present)


def nominal(sim: Any, t: dict[str, Any], window: tuple[float, float]) -> dict[str, float]:
    """The scaled cloud-side seconds of one run: boots (creates and starts, each until sshd answers), image
    downloads (bytes over the pull rate) and the steps' nominal work."""
    calls = [c for c in sim.calls() if window[0] <= c["ts"] <= window[1] and c.get("exit_code") == 0]
    creates = sum(1 for c in calls if c.get("command") == "create" and "--help" not in c["argv"])
    starts = sum(1 for c in calls if c.get("command") == "start")
    pulled = sum(int(c.get("bytes") or 0) for c in sim.docker_calls() if window[0] <= c["ts"] <= window[1])
    return {
        "boot": creates * (t["deploy_seconds"] + t["ssh_seconds"]) + starts * (t["start_seconds"] + t["ssh_seconds"]),
        "pull": pulled / t["pull_bytes_per_second"],
        "work": sum(t["nominal_work_seconds"].values()),
        "creates": creates,
        "starts": starts,
        "pulled_bytes": pulled,
    }


def provider_run(sim: Any, watcher: InstanceWatcher, dag: Any, conf: dict[str, Any], t: dict[str, Any]) -> dict:
    """One ``dag.test()`` run of the flagship, projected from its own timeline (``_bill_timeline.py``)."""
    from _bill_timeline import billed_intervals, downloads, project, tao_runs

    first_span = len(SPANS)
    started = time.time()
    dag_run = dag.test(logical_date=None, run_conf=conf)
    ended = time.time()
    watcher.sample()
    window = (started, ended)
    cloud = nominal(sim, t, window)
    tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    report = tis["cost_report"].xcom_pull(task_ids="cost_report") or {}
    price = next((task.get("price_per_hour") for task in report.get("tasks", []) if task.get("price_per_hour")), None)
    name = str(tis["create_instance"].xcom_pull(task_ids="create_instance"))
    boot_nominal = {"deploy": t["deploy_seconds"] + t["ssh_seconds"], "start": t["start_seconds"] + t["ssh_seconds"]}
    billed, boots = [], []
    for record in watcher.by_name(name):
        more = billed_intervals(record, window, boot_nominal)
        billed += more[0]
        boots += more[1]
    steps = ("gap_analysis", "train", "evaluate")
    timeline = project(
        billed=billed,
        boots=boots,
        runs=tao_runs(sim.root, name, window),
        pulls=downloads(sim, name, window, t["pull_bytes_per_second"]),
        spans=[s for s in SPANS[first_span:] if started <= s["start"] <= ended],
        nominal_work=t["nominal_work_seconds"],
        step_images={task: dag.get_task(task).image for task in steps},
        scale=t["scale"],
    )
    staged = {
        task: [
            {k: entry.get(k) for k in ("transferred", "skipped")}
            for entry in ((tis[task].xcom_pull(task_ids=task) or {}).get("sync") or {}).get("inputs") or []
        ]
        for task in steps
    }
    return {
        "state": str(getattr(dag_run.state, "value", dag_run.state)),
        "task_states": {k: str(getattr(v.state, "value", v.state)) for k, v in tis.items()},
        "instance": name,
        "wall_s": round(ended - started, 1),
        "billed_intervals": billed,
        "price_per_hour": price,
        "nominal_cloud_seconds": cloud,
        "inputs_staged": staged,
        "cost_report_seconds": report.get("seconds"),
        "timeline": {k: v for k, v in timeline.items() if k not in ("measured", "projected")},
        "measured": side(timeline["measured"], price),
        "projected": side(timeline["projected"], price),
    }


def side(values: dict[str, float], price: float | None) -> dict[str, Any]:
    """Seconds per label, their total (the billed time), the non-work share and the dollars."""
    from airflow_provider_brev.core.cost import dollars

    total = sum(values.values())
    return {
        "seconds": {k: round(float(v), 3) for k, v in values.items()},
        "total_s": round(total, 3),
        "non_work_share": round(1 - values["work"] / total, 4) if total else None,
        "dollars": dollars(price, total),
    }


def summarise(phases: dict[str, float], cloud: dict[str, float], price: float | None, scale: float) -> dict[str, Any]:
    """The seed recipe's measured and projected seconds: it runs every phase one after the other, so projected =
    measured + (scale - 1) x the phase's nominal cloud-side seconds (host-side time in a phase is not multiplied)."""
    measured = {k: round(float(v), 3) for k, v in phases.items()}
    projected = {
        k: round(v + (scale - 1) * float(cloud[k]) if k in CLOUD_PHASES else v, 3) for k, v in measured.items()
    }
    return {"measured": side(measured, price), "projected": side(projected, price)}


def seed_work(marker: Path, t: dict[str, Any], images: tuple[str, str], bucket: str, prefix: str, name: str) -> str:
    """The seed recipe's work command, extended with the flagship's steps (timestamps into ``marker``)."""
    gap, train, evaluate = (t["nominal_work_seconds"][k] for k in ("gap_analysis", "train", "evaluate"))
    ds, pyt = images
    run = "docker run --rm --gpus all -v $HOME/data:/data -v $HOME/results:/results"
    return (
        f'set -e; t() {{ echo "$1 $(date +%s.%N)" >> {marker}; }}; '
        f"t pull; docker pull {ds} >/dev/null; docker pull {pyt} >/dev/null; "
        f"t stage; aws s3 sync s3://{bucket}/{prefix} data >/dev/null; "
        f"t work; {run} {ds} sleep {gap:.3f}; {run} {pyt} sleep {train:.3f}; {run} {pyt} sleep {evaluate:.3f}; "
        f"t upload; mkdir -p results; date > results/done.txt; aws s3 sync results s3://{bucket}/seed-runs/{name}/; "
        "t end"
    )


def seed_run(sim: Any, watcher: InstanceWatcher, t: dict[str, Any], work: str, marker: Path, name: str) -> dict:
    home = BASE / "seed-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{sim.bin_dir}:/usr/bin:/bin", "HOME": str(home), "FAKE_BREV_STATE": str(sim.root)}
    env["BREV_API_TOKEN"] = sim.valid_token
    started = time.time()
    proc = subprocess.run(
        ["bash", str(BENCH_DIR / "seed_recipe.sh"), name, work],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    time.sleep(0.3)  # let the watcher see the DELETING record
    inst = watcher.by_name(name)[-1]
    stamps: dict[str, float] = {}
    for line in marker.read_text().splitlines():  # a re-run (the CLI re-runs failed commands) keeps the last
        stamps[line.split()[0]] = float(line.split()[1])
    if proc.returncode != 0 or "end" not in stamps:
        raise RuntimeError(f"the seed recipe failed ({proc.returncode}): {proc.stdout[-800:]} {proc.stderr[-800:]}")
    created, ssh_up = float(inst["created_at"]), float(inst["t_ssh_up"])
    deleting = float(inst.get("t_deleting") or time.time())
    cloud = nominal(sim, t, (started, time.time()))
    phases = dict.fromkeys(LABELS, 0.0) | {
        "boot": ssh_up - created,
        "pull": stamps["stage"] - stamps["pull"],
        "stage": stamps["work"] - stamps["stage"],
        "work": stamps["upload"] - stamps["work"],
        "upload": stamps["end"] - stamps["upload"],
        "detection": stamps["pull"] - ssh_up,  # sshd up -> the seed's poll noticed and its work command began
        "delete": deleting - stamps["end"],
    }
    return {
        "exit_code": proc.returncode,
        "stderr_tail": proc.stderr[-400:],
        "wall_s": round(time.time() - started, 1),
        "billed_s": round(deleting - created, 3),
        "instance_type": inst.get("instance_type"),
        "nominal_cloud_seconds": cloud,
        "phases_raw": phases,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--object-bytes", type=int, default=50_000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import demo  # the flagship's local services (simulator, moto S3, connections), as `make demo` runs them

    shutil.rmtree(BASE, ignore_errors=True)
    BASE.mkdir(parents=True)
    t = timings(args.scale)
    demo._prepare_airflow(BASE)  # before anything imports Airflow (its configuration is read once)
    from _bill_timeline import record_meter_spans
    from bench_stage_small import BASE as MOTO_LOG_DIR
    from bench_stage_small import Moto

    record_meter_spans(SPANS)
    MOTO_LOG_DIR.mkdir(parents=True, exist_ok=True)  # Moto writes its log there
    moto = Moto()  # its own process: its CPU does not compete with the measured one for this process's GIL
    sim, _, endpoint = demo._start_local_services(BASE, s3_endpoint=moto.endpoint)
    from airflow_provider_brev.testing import BrevSimulator

    seed_sim = BrevSimulator(BASE / "seed-sim", profile="released").install()
    for s in (sim, seed_sim):
        configure(s, t)
    seed_sim.set_docker(nvcr_anonymous_pull=True)  # the seed's docker login is not part of the comparison
    from airflow_provider_brev.testing.local_s3 import (  # demo's aws_default
        DUMMY_ACCESS_KEY_ID,
        DUMMY_SECRET_ACCESS_KEY,
    )

    seed_env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID}
    seed_sim.set_config(sandbox_env=seed_env | {"AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY})
    seed_sim.add_tool("aws", f'#!/bin/sh\nexec {sys.executable} {BENCH_DIR / "bill_aws.py"} "$@"\n')
    watchers = {"provider": InstanceWatcher(sim), "seed": InstanceWatcher(seed_sim)}
    result: dict[str, Any] = {"timings": t, "real_timeline": REAL, "warm_reuse_supported": True}
    try:
        objects = seed_dataset(demo.DEMO_BUCKET, demo.DATASET_PREFIX, args.objects, args.object_bytes)
        result["dataset"] = {"objects": objects, "object_bytes": args.object_bytes}
        progress(f"bill: {objects} dataset objects in S3; scale {args.scale:g}")
        from airflow.models import DagBag
        from airflow.utils.db import initdb

        initdb()
        dag = DagBag(dag_folder=str(BASE / "dags")).get_dag(demo.DEFAULT_DAG)
        conf = {"bucket": demo.DEMO_BUCKET, "dataset_prefix": demo.DATASET_PREFIX, "num_epochs": TRAIN_EPOCHS}
        conf |= {"reuse_key": REUSE_KEY, "max_idle_hours": 1}  # the DAG's own warm default (release="stop")
        for w in watchers.values():
            w.start()
        images = (dag.get_task("gap_analysis").image, dag.get_task("train").image)
        marker = BASE / "seed-marker"
        work = seed_work(marker, t, images, demo.DEMO_BUCKET, demo.DATASET_PREFIX, "bill-seed")
        seed_out: dict[str, Any] = {}
        seed = threading.Thread(
            target=lambda: seed_out.update(seed_run(seed_sim, watchers["seed"], t, work, marker, "bill-seed"))
        )
        seed.start()
        progress("bill: provider fresh run and seed recipe")
        result["provider_fresh"] = provider_run(sim, watchers["provider"], dag, conf, t)
        seed.join()
        if "error" in seed_out:
            raise RuntimeError(seed_out["error"])
        price = result["provider_fresh"]["price_per_hour"]
        seed_out.update(summarise(seed_out.pop("phases_raw"), seed_out["nominal_cloud_seconds"], price, args.scale))
        result["seed_recipe"] = seed_out
        progress("bill: provider warm run")
        result["provider_second"] = provider_run(sim, watchers["provider"], dag, conf, t)
        result["second_run_kind"] = "warm (reuse_key, release=stop)"
    finally:
        for w in watchers.values():
            w.stop()
        settle = time.monotonic() + 10 * t["delete_seconds"]  # a deletion just requested is still DELETING
        while time.monotonic() < settle and any(i.get("status") == "DELETING" for i in sim.instances()):
            time.sleep(0.2)
        left = [(i["name"], i.get("status")) for s in (sim, seed_sim) for i in s.instances()]
        result["instances_left"] = left  # a warm reuse leaves its instance STOPPED on purpose
        result["leaked_instances"] = sum(1 for _, status in left if status != "STOPPED")
        for s in (sim, seed_sim):
            s.kill_all()
        moto.stop()
    write_json(Path(args.out), json.loads(json.dumps(result, default=str)))
    for key in ("provider_fresh", "provider_second", "seed_recipe"):
        p = result[key]["projected"]
        progress(f"bill: {key}: projected {p['total_s']:.0f} s, non-work {p['non_work_share']:.1%}, ${p['dollars']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
