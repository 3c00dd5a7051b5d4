"""A small synthetic Visual ChangeNet (classify) dataset, for the demo and for tests.

Layout under an S3 prefix (or a local directory)::

    images/<object>_<n>.jpg, images/<object>_<n>_golden.jpg   tiny placeholder images
    train.csv, val.csv, test.csv                               input_path,golden_path,label,object_name
    champion/train_config.yaml                                 the previous model's training spec
    champion/inference/inference.csv                           its inference on the new data (for gap analysis)

Deterministic (seeded), stdlib only.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import Any

OBJECTS = ("resistor", "capacitor", "connector", "ic")
CHAMPION_TRAIN_CONFIG = """\
dataset:
  classify:
    image_ext: .jpg
    batch_size: 4
    workers: 2
model:
  classify:
    learnable_difference_modules: 4
train:
  num_epochs: 3
"""


def synthetic_vcn_files(samples: int = 48, seed: int = 7) -> dict[str, bytes]:
    """``{relative path: content}`` of the synthetic dataset."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    rows = []
    for index in range(samples):
        obj = OBJECTS[index % len(OBJECTS)]
        label = "NO_PASS" if index % 3 == 0 else "PASS"
        stem = f"{obj}_{index:03d}"
        files[f"images/{stem}.jpg"] = b"\xff\xd8\xff\xe0FAKEJPEG" + rng.randbytes(64)
        files[f"images/{stem}_golden.jpg"] = b"\xff\xd8\xff\xe0FAKEJPEG" + rng.randbytes(64)
        rows.append(
            {"input_path": f"{stem}.jpg", "golden_path": f"{stem}_golden.jpg", "label": label, "object_name": obj}
        )
    splits = {
        "train.csv": rows[: samples // 2],
        "val.csv": rows[samples // 2 : 3 * samples // 4],
        "test.csv": rows[3 * samples // 4 :],
    }
    for name, part in splits.items():
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["input_path", "golden_path", "label", "object_name"])
        writer.writeheader()
        writer.writerows(part)
        files[name] = buffer.getvalue().encode()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["input_path", "object_name", "label", "siamese_score"])
    writer.writeheader()
    for row in rows:
        score = rng.uniform(0.5, 1.0) if row["label"] == "NO_PASS" else rng.uniform(0.0, 0.6)
        writer.writerow(
            {
                "input_path": row["input_path"],
                "object_name": row["object_name"],
                "label": row["label"],
                "siamese_score": f"{score:.4f}",
            }
        )
    files["champion/inference/inference.csv"] = buffer.getvalue().encode()
    files["champion/train_config.yaml"] = CHAMPION_TRAIN_CONFIG.encode()
    return files


def upload_synthetic_vcn_dataset(s3_client: Any, bucket: str, prefix: str, **kwargs: Any) -> int:
    """Put the dataset under ``s3://bucket/prefix``; returns the number of objects."""
    files = synthetic_vcn_files(**kwargs)
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    for path, content in files.items():
        s3_client.put_object(Bucket=bucket, Key=prefix + path, Body=content)
    return len(files)


def write_synthetic_vcn_dataset(directory: Path | str, **kwargs: Any) -> int:
    """Write the dataset into a local directory; returns the number of files."""
    root = Path(directory)
    files = synthetic_vcn_files(**kwargs)
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return len(files)
