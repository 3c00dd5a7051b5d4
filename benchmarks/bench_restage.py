"""Re-staging an unchanged input prefix: the second ``sync_inputs`` of ``--objects`` small objects.

Same set-up as ``bench_stage_small.py`` (moto in its own process, a ready simulated instance): the first sync
downloads everything and writes the manifest; the second sync of the unchanged prefix must download nothing.
Reported: ``objects_downloaded`` by the second sync (goal 0), its seconds against the first sync's, and the
``brev`` calls it made by subcommand (no ``copy``: neither a plan file nor a manifest is shipped).

    python benchmarks/bench_restage.py --out result.json [--objects 10000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from _common import progress, subcommand, write_json
from bench_stage_small import BASE, check_placed, provider_sync, setup


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--objects", type=int, default=10_000)
    args = parser.parse_args()
    moto, sim, hook, sizes = setup(args.objects, seed=12)
    try:
        progress(f"restage: first sync of {args.objects} objects")
        first_s, first = provider_sync(hook, "data/images")
        mark = time.time()
        progress("restage: second sync of the unchanged prefix")
        second_s, second = provider_sync(hook, "data/images")
        calls = [c for c in sim.calls() if float(c.get("ts", 0)) >= mark]
        placed = check_placed(sim, "data/images", sizes)
    finally:
        sim.kill_all()
        moto.stop()
    result = {
        "objects": args.objects,
        "bytes": sum(sizes.values()),
        "first_sync_s": round(first_s, 2),
        "first_sync_objects_downloaded": first.transferred,
        "objects_downloaded": second.transferred,
        "objects_skipped": second.skipped,
        "second_sync_s": round(second_s, 2),
        "second_vs_first": round(second_s / first_s, 3),
        "second_sync_brev_calls": dict(Counter(subcommand(c["argv"]) for c in calls)),
        "objects_in_place": placed,
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    progress(
        f"restage: first {first_s:.1f} s ({first.transferred} downloaded), second {second_s:.2f} s "
        f"({second.transferred} downloaded, {second.skipped} unchanged)"
    )
    return 0 if placed == args.objects and second.transferred == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
