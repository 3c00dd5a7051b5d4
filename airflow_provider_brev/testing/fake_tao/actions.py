"""The simulated TAO actions and the entrypoint ``main``."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import statistics
import sys
import time

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_tao.run import RunContext, _fmt_td, _unit
from airflow_provider_brev.testing.fake_tao.spec import (
    NETWORK_ACTIONS,
    PARQUET_MAGIC,
    SIMULATED,
    SpecError,
    TaoFailure,
    get,
    parse_spec,
    require,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Run(RunContext):
    """A TAO action run: ``train``, ``evaluate``, ``inference`` and ``export`` (``visual_changenet``), ``vcn_aoi``
    (``gap_analysis``)."""

    def train(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet train.")
        num_epochs = int(get(self.cfg, "train.num_epochs", 100))
        ci = int(get(self.cfg, "train.checkpoint_interval", 1))
        vi = int(get(self.cfg, "train.validation_interval", 1))
        if num_epochs < 1:
            raise TaoFailure(f"ValueError: Configuration error: train.num_epochs must be >= 1, got {num_epochs}")
        for key, val in (("checkpoint_interval", ci), ("validation_interval", vi)):
            if val < 1 or val > num_epochs:
                raise TaoFailure(
                    f"ValueError: Configuration error: train.{key} ({val}) must be between 1 and train.num_epochs ({num_epochs})"
                )
        num_gpus = int(get(self.cfg, "train.num_gpus", 1))
        gpu_ids = get(self.cfg, "train.gpu_ids")
        if isinstance(gpu_ids, list) and len(gpu_ids) > num_gpus:
            num_gpus = len(gpu_ids)
        self.check_gpu(num_gpus)
        rows, _img = self.split_dataset("train_dataset")
        self.split_dataset("validation_dataset", "validation")
        labels = {(r.get("label") or "").strip() for r in rows if "label" in r}
        if len(labels) == 1:
            raise TaoFailure(
                f"ValueError: The training dataset contains a single class ({labels.pop()!r}); "
                "Visual ChangeNet classify needs PASS and NO_PASS samples"
            )
        batch = int(get(self.cfg, "dataset.classify.batch_size", 16))
        workers = int(get(self.cfg, "dataset.classify.workers", 2))
        if batch <= 1:
            raise TaoFailure(f"ValueError: Configuration error: dataset.classify.batch_size must be > 1, got {batch}")
        backbone = get(self.cfg, "model.backbone.pretrained_backbone_path")
        if backbone not in (None, ""):
            if "://" in str(backbone):
                raise TaoFailure(f"FileNotFoundError: [Errno 2] No such file or directory: '{backbone}'")
            self.need_file(str(backbone), "model.backbone.pretrained_backbone_path")
        pretrained = get(self.cfg, "train.pretrained_model_path")
        if pretrained not in (None, ""):
            self.need_file(str(pretrained), "train.pretrained_model_path")
            self.log(f"Loading pretrained weights from {pretrained}")
        start = 0
        resume = get(self.cfg, "train.resume_training_checkpoint_path")
        if resume not in (None, ""):
            info = self.checkpoint_info(self.need_file(str(resume), "train.resume_training_checkpoint_path"))
            if "epoch" not in info:
                raise TaoFailure(f"_pickle.UnpicklingError: invalid load key, '{resume}' is not a checkpoint")
            start = int(info["epoch"]) + 1
            self.log(f"Resuming training from checkpoint {resume} (epoch {start})")
        self.info.update(num_epochs=num_epochs, start_epoch=start)
        steps_per_epoch = max(1, math.ceil(len(rows) / (batch * max(1, num_gpus))))
        silent = start >= num_epochs
        if not silent and _c.consume_knob(self.root, "tao", "silent_pass", "train"):
            silent = True
        if silent:
            self.raw(f"`Trainer.fit` stopped: `max_epochs={num_epochs}` reached.\n")
            self.status.write("SUCCESS", "Train finished successfully.")
            self.info.update(outcome="silent_pass", epochs_run=0)
            self.raw("Train finished successfully.\n")
            return {}
        fault = self.fault()
        fail_epoch = min(max(int(self.knobs.get("fail_at_epoch") or 0), start), num_epochs - 1)
        epoch_seconds = float(self.knobs.get("epoch_seconds") or 0.0)
        latest = os.path.join(self.action_dir, f"changenet_model_{self.task}_latest.pth")
        seed = f"{self.display(self.action_dir)}:{self.spec_arg}"
        kpi: dict[str, Any] = {}
        t0 = time.monotonic()
        self.check_shm(workers)
        for e in range(start, num_epochs):
            if fault and e == fail_epoch:
                self.progress(f"Epoch {e}", steps_per_epoch, epoch_seconds / 2)
                self.raise_fault(fault)
            t_epoch = time.monotonic()
            train_loss = round(0.9 * math.exp(-0.35 * (e + 1)) + 0.05 + 0.02 * _unit(f"t{e}{seed}"), 4)
            val_loss = round(0.95 * math.exp(-0.3 * (e + 1)) + 0.08 + 0.03 * _unit(f"v{e}{seed}"), 4)
            self.progress(f"Epoch {e}", steps_per_epoch, epoch_seconds, f", loss={train_loss}, v_num=0")
            step = (e + 1) * steps_per_epoch
            validated = (e + 1) % vi == 0
            if validated:
                kpi = {"val_loss": val_loss, "val_acc": round(min(0.995, 0.7 + 0.3 * (1 - val_loss)), 4)}
            elapsed = time.monotonic() - t_epoch
            self.status.write(
                "RUNNING",
                None,
                epoch=e,
                max_epoch=num_epochs,
                time_per_epoch=_fmt_td(elapsed),
                eta=_fmt_td(elapsed * (num_epochs - e - 1)),
                kpi=self.apply_kpis(kpi) if validated else None,
                graphical={"train_loss": train_loss, **({"val_loss": val_loss} if validated else {})},
            )
            line = f"Epoch {e + 1}/{num_epochs} - train_loss: {train_loss:.4f}"
            self.raw(line + (f" - val_loss: {val_loss:.4f}" if validated else "") + "\n")
            if (e + 1) % ci == 0:
                name = f"model_epoch_{e:03d}_step_{step:05d}.pth"
                host = os.path.join(self.action_dir, name)
                self.write_checkpoint(host, {"epoch": e, "step": step, "num_epochs": num_epochs, "val_loss": val_loss})
                self.info["checkpoints_written"].append(name)
                self.log(f"Saved checkpoint: {self.display(host)}", name="lightning")
                with contextlib.suppress(OSError):  # Lightning's save_last link follows every save (atomically)
                    os.symlink(name, f"{latest}.tmp.{os.getpid()}")
                    os.replace(f"{latest}.tmp.{os.getpid()}", latest)
            self.epoch_done(e)
        self.info.update(
            outcome="success", epochs_run=num_epochs - start, train_seconds=round(time.monotonic() - t0, 3)
        )
        final = self.apply_kpis(kpi)
        self.status.write("SUCCESS", "Train finished successfully.", kpi=final or None)
        self.raw("Train finished successfully.\n")
        return final

    def _checkpoint(self) -> dict:
        ckpt = require(self.cfg, f"{self.action}.checkpoint")
        host = self.need_file(str(ckpt), f"{self.action}.checkpoint")
        info = self.checkpoint_info(host)
        self.log(f"Loading checkpoint {ckpt}")
        return info

    def evaluate(self) -> dict:
        assert self.status is not None
        self.status.write("STARTED", "Starting Visual ChangeNet evaluation.")
        self.check_gpu(int(get(self.cfg, "evaluate.num_gpus", 1)))
        info = self._checkpoint()
        epochs = int(info.get("epoch", 4)) + 1
        rows, _ = self.split_dataset("test_dataset", "test")
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        batch = max(2, int(get(self.cfg, "dataset.classify.batch_size", 16)))
        self.progress("Testing DataLoader 0", max(1, math.ceil(len(rows) / batch)), float(self.knobs["epoch_seconds"]))
        quality = 1 - math.exp(-epochs / 5)
        acc = round(0.8 + 0.19 * quality, 4)
        fpr, fnr = round((1 - acc) * 0.6, 4), round((1 - acc) * 0.4, 4)
        kpi = self.apply_kpis({"test_acc": acc, "test_fpr": fpr, "test_fnr": fnr, "defect_acc": round(acc - 0.02, 4)})
        rule = "\u2500" * 62
        self.raw(f"{rule}\n{'Test metric':>24}{'DataLoader 0':>30}\n{rule}\n")
        for key, val in kpi.items():
            self.raw(f"{key:>24}{val!s:>30}\n")
        self.raw(f"{rule}\n")
        self.status.write("SUCCESS", "Evaluation finished successfully.", kpi=kpi)
        self.info["outcome"] = "success"
        return kpi

    def inference(self) -> dict:
        """Score every sample of ``dataset.classify.infer_dataset`` with the checkpoint: ``inference.csv`` (the
        columns gap analysis reads) in the action's results directory."""
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet inference.")
        self.check_gpu(int(get(self.cfg, "inference.num_gpus", 1)))
        info = self._checkpoint()
        rows, _ = self.split_dataset("infer_dataset", "inference")
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        batch = max(2, int(get(self.cfg, "dataset.classify.batch_size", 16)))
        self.progress(
            "Predicting DataLoader 0", max(1, math.ceil(len(rows) / batch)), float(self.knobs["epoch_seconds"])
        )
        quality = 1 - math.exp(-(int(info.get("epoch", 4)) + 1) / 5)
        with open(os.path.join(self.action_dir, "inference.csv"), "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["input_path", "object_name", "label", "siamese_score"])
            writer.writeheader()
            for row in rows:
                defect = (row.get("label") or "").strip().upper() != "PASS"
                noise = 0.3 * (1 - quality) * _unit(row.get("input_path", ""))
                score = round(min(1.0, max(0.0, (0.8 if defect else 0.2) + (noise if not defect else -noise))), 4)
                writer.writerow(
                    {k: row.get(k, "") for k in ("input_path", "object_name", "label")} | {"siamese_score": score}
                )
        self.log(f"Inference results written to {self.display(os.path.join(self.action_dir, 'inference.csv'))}")
        self.status.write("SUCCESS", "Inference finished successfully.")
        self.info["outcome"] = "success"
        return {}

    def export(self) -> dict:
        """Write the ONNX file of the checkpoint (``export.onnx_file``, default ``<results>/export/changenet.onnx``)."""
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet export.")
        info = self._checkpoint()
        target = get(self.cfg, "export.onnx_file")
        host = (
            self.resolve(str(target)) if target not in (None, "") else os.path.join(self.action_dir, "changenet.onnx")
        )
        if not os.path.isdir(os.path.dirname(host)):
            raise TaoFailure(f"FileNotFoundError: [Errno 2] No such file or directory: '{target}'")
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        with open(host, "wb") as fh:
            fh.write(b"\x08\x07\x12\x07pytorch" + json.dumps({"fake": "onnx", **info}).encode())
        self.log(f"ONNX file stored at {self.display(host)}")
        self.status.write("SUCCESS", "Export finished successfully.")
        self.info["outcome"] = "success"
        return {}

    def vcn_aoi(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        out_dir = self.action_dir
        self.status.write("STARTED", "Starting VCN AOI gap analysis.")
        self.check_gpu()
        inf_dir = require(self.cfg, "inference_results_dir")
        inf_host = self.need_file(str(inf_dir), "inference_results_dir", directory=True)
        csv_host = os.path.join(inf_host, "inference.csv")
        if not os.path.isfile(csv_host):
            raise TaoFailure(
                f"FileNotFoundError: [Errno 2] No such file or directory: '{os.path.join(str(inf_dir), 'inference.csv')}'"
            )
        train_cfg_value = require(self.cfg, "train_config")
        train_cfg_host = self.need_file(str(train_cfg_value), "train_config")
        media = require(self.cfg, "kpi_media_path")
        self.need_file(str(media), "kpi_media_path", directory=True)
        rows = self.read_rows(csv_host, os.path.join(str(inf_dir), "inference.csv"))
        needed = ["input_path", "object_name", "label", "siamese_score"]
        missing_cols = [c for c in needed if rows and c not in rows[0]]
        if not rows or missing_cols:
            raise TaoFailure(f"ValueError: inference.csv is missing required columns: {missing_cols or needed}")
        try:
            with open(train_cfg_host, encoding="utf-8") as fh:
                tcfg = parse_spec(fh.read()) or {}
        except SpecError as exc:
            raise TaoFailure(
                f"yaml.scanner.ScannerError: {exc.message} in '{train_cfg_value}', line {exc.line}"
            ) from None
        input_map = get(tcfg, "dataset.classify.input_map")
        lights = list(input_map) if isinstance(input_map, dict | list) else []
        ext = str(get(tcfg, "dataset.classify.image_ext", ".jpg") or ".jpg")
        if not lights:
            self.log("dataset.classify.input_map not set in train_config: one row per sample", "WARNING")
        min_recall = float(get(self.cfg, "min_recall", 1.0))
        top_k = get(self.cfg, "top_k_per_label")
        fixed = float(get(self.cfg, "threshold", -1.0))
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        scored = [
            (r["input_path"], r["object_name"], r["label"].strip().upper(), float(r["siamese_score"])) for r in rows
        ]

        def metrics(t: float) -> dict:
            tp = sum(1 for _p, _o, lab, s in scored if lab != "PASS" and s >= t)
            fn = sum(1 for _p, _o, lab, s in scored if lab != "PASS" and s < t)
            fp = sum(1 for _p, _o, lab, s in scored if lab == "PASS" and s >= t)
            tn = sum(1 for _p, _o, lab, s in scored if lab == "PASS" and s < t)
            rec = tp / (tp + fn) if tp + fn else 0.0
            prec = tp / (tp + fp) if tp + fp else 0.0
            f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
            return {"threshold": t, "precision": prec, "recall": rec, "f1": f1, "tp": tp, "fp": fp, "tn": tn, "fn": fn}

        if fixed >= 0:
            cands = [metrics(fixed)]
        else:
            uniq = sorted({s for *_x, s in scored})
            cands = [metrics(t) for t in [*uniq, uniq[0] - 1e-6]]
        ok = [m for m in cands if m["recall"] >= min_recall - 1e-12]
        sweep = self.knobs.get("gap_analysis_seconds")
        sweep = float(self.knobs.get("epoch_seconds") or 0) / 2 if sweep is None else float(sweep)
        self.progress("Sweeping thresholds", len(cands), sweep)
        forced = bool(ok) and _c.consume_knob(self.root, "tao", "unreachable_kpi", "vcn_aoi")
        if not ok or forced:
            best_rec = max(cands, key=lambda m: (m["recall"], m["precision"]))
            reachable = min(best_rec["recall"], max(0.0, min_recall - 0.0625)) if forced else best_rec["recall"]
            text = (
                f"KPI unreachable: no decision threshold reaches NO_PASS recall >= {min_recall}.\n"
                f"Best achievable recall: {reachable:.4f} at threshold {best_rec['threshold']:.6f} "
                f"(precision {best_rec['precision']:.4f}).\nRecommendation: retrain or relabel.\n"
            )
            host = os.path.join(out_dir, "unreachable_kpi.txt")
            self.writable(host)
            with open(host, "w", encoding="utf-8") as fh:
                fh.write(text)
            self.raw(text)
            self.info["outcome"] = "unreachable_kpi"
            raise TaoFailure(
                f"SystemExit: KPI unreachable at min_recall={min_recall}",
                f"KPI unreachable: min_recall={min_recall} cannot be met",
            )
        best = max(ok, key=lambda m: (m["f1"], m["precision"], m["threshold"]))
        t = best["threshold"]
        weak = [(p, o, lab, s, (t - s) if lab != "PASS" else (s - t)) for p, o, lab, s in scored]
        by_label: dict[str, list] = {}
        for item in weak:
            by_label.setdefault(item[2], []).append(item)
        kept: list = []
        for lab in sorted(by_label):
            items = sorted(by_label[lab], key=lambda x: -x[4])
            if isinstance(top_k, int) and top_k > 0:
                kept += items[:top_k]
            elif lab == "PASS":
                kept += [x for x in items if x[4] > 0]
        media_s = str(media).rstrip("/")
        gaps = []
        for p, o, lab, s, wk in kept:
            for light in lights or [None]:
                fp = f"{media_s}/{p}/{o}_{light}{ext}" if light is not None else f"{media_s}/{p}"
                gaps.append({"filepath": fp, "label": lab, "siamese_score": s, "weakness": round(wk, 6)})
        per_label = {}
        for lab, items in sorted(by_label.items()):
            ws = [x[4] for x in items]
            per_label[lab] = {
                "total": len(items),
                "mean_weakness": round(statistics.fmean(ws), 6),
                "median_weakness": round(statistics.median(ws), 6),
                "max_weakness": round(max(ws), 6),
                "n_misclassified": sum(1 for w in ws if w > 0),
            }
        conf = {k: best[k] for k in ("tp", "fp", "tn", "fn")}
        result = {
            "threshold": round(t, 6),
            "min_recall": min_recall,
            "precision": round(best["precision"], 6),
            "recall": round(best["recall"], 6),
            "f1": round(best["f1"], 6),
            **conf,
            "confusion_matrix": conf,
            "num_samples": len(scored),
            "top_k_per_label": top_k,
            "per_label": per_label,
        }
        files = {
            "threshold.txt": f"{t:.6f}\n".encode(),
            "metrics.json": (json.dumps(result, indent=2) + "\n").encode(),
            "kpi_gaps.parquet": PARQUET_MAGIC + "".join(json.dumps(g) + "\n" for g in gaps).encode() + PARQUET_MAGIC,
        }
        lines = [f"Weak samples breakdown (threshold={t:.6f}, top_k_per_label={top_k})"]
        total_kept = len(kept) or 1
        for lab in sorted(by_label):
            ks = [x for x in kept if x[2] == lab]
            mis = sum(1 for x in ks if x[4] > 0)
            lines.append(
                f"{lab}: {len(ks)} total ({100.0 * len(ks) / total_kept:.1f}% of kept rows), "
                f"{mis} misclassified (weakness > 0), {len(ks) - mis} marginal (weakness <= 0)"
            )
        files["weak_samples_breakdown.txt"] = ("\n".join(lines) + "\n").encode()
        for name, data in files.items():
            host = os.path.join(out_dir, name)
            self.writable(host)
            with open(host, "wb") as bfh:
                bfh.write(data)
        self.raw(
            f"Chosen threshold: {t:.6f} (precision={best['precision']:.4f} recall={best['recall']:.4f} f1={best['f1']:.4f})\n"
            f"Kept rows: {len(kept)} ({len(gaps)} per-lighting rows) -> {self.display(os.path.join(out_dir, 'kpi_gaps.parquet'))}\n"
        )
        self.raw("\n".join(lines[1:]) + "\n")
        kpi = {
            "threshold": result["threshold"],
            "precision": result["precision"],
            "recall": result["recall"],
            "f1": result["f1"],
        }
        self.status.write("SUCCESS", "Gap analysis finished successfully.", kpi=kpi)
        self.info["outcome"] = "success"
        return kpi


def main(prog: str, argv: list[str]) -> int:
    """The entrypoint ``prog`` (``visual_changenet``/``gap_analysis``): ``<action> -e <spec> [key=value ...]``."""
    import argparse

    env = os.environ
    if not env.get("BREV_SIM_CONTAINER") or not _c.image_provides(env.get("BREV_SIM_CONTAINER_IMAGE", ""), prog):
        sys.stderr.write(f"bash: line 1: {prog}: command not found\n")
        return 127
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("subtask", choices=NETWORK_ACTIONS[prog])
    parser.add_argument("-e", "--experiment_spec_file", default=None)
    args, overrides = parser.parse_known_args(argv)
    action, spec = args.subtask, args.experiment_spec_file
    missing = "requires the following argument: -e/--experiment_spec_file\n"
    if spec is None and prog == "gap_analysis":
        sys.stdout.write(f"Traceback (most recent call last):\nValueError: The subtask {action} {missing}")
    elif spec is None:
        sys.stdout.write(f"ERROR: The subtask `{action}` {missing}")
    if spec is None:
        return 1
    run = Run(prog, action, spec, overrides)
    if not os.path.exists(run.resolve(str(run.spec_arg))):
        sys.stdout.write(f"ERROR: The indicated experiment spec file `{run.spec_arg}` doesn't exist!\n")
        return 1
    if action not in SIMULATED:
        sys.stdout.write(f"ERROR: fake TAO: the subtask `{action}` is not simulated\n")
        return 1
    return run.execute()
