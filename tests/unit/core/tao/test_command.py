"""Pure TAO command building, report parsing and fault classification."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.tao.command import (
    STARTED_MARKER,
    build_tao_command,
    format_override,
    image_registry,
    images_to_prefetch,
    remote_path,
    spec_references_hugging_face,
    validate_image,
)
from unit.core.jobs.pulls_helpers import DS, PYT

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


@pytest.mark.parametrize("image", [IMAGE, "nvcr.io/nvidia/tao/tao-toolkit@sha256:" + "a" * 64, "registry:5000/x/y:1"])
def test_valid_images(image):
    assert validate_image(image) == image


@pytest.mark.parametrize("image", ["tao-toolkit", "nvcr.io/nvidia/tao/tao-toolkit", "nvcr.io/x:latest; rm -rf /", ""])
def test_images_without_registry_or_explicit_tag_are_refused(image):
    with pytest.raises(ValueError, match="explicit tag or digest"):
        validate_image(image)


def test_docker_command_passes_secrets_by_name_only():
    command = build_tao_command(
        image=IMAGE,
        task="visual_changenet",
        action="train",
        spec_file="visual_changenet_train.yaml",
        results_dir="runs/r1",
        overrides={"train.num_epochs": 5, "train.pretrained_model_path": "/results/prev.pth"},
        mounts={"data/vcn": "/data"},
        env={"PLAIN": "1"},
        secret_env_names=["HF_TOKEN"],
        num_gpus=2,
    )
    assert "-e HF_TOKEN " in command and "HF_TOKEN=" not in command
    assert "--gpus 2" in command and "--shm-size 8g" in command
    assert '"$HOME"/data/vcn:/data' in command
    assert "visual_changenet train -e /specs/visual_changenet_train.yaml results_dir=/results" in command
    assert "train.num_epochs=5" in command and "train.num_gpus=2" in command


def test_overrides_are_formatted_for_hydra():
    assert format_override("a.b", True) == "a.b=true"
    assert format_override("a", [1, 2]) == "a=[1,2]"
    with pytest.raises(ValueError, match="Invalid override key"):
        format_override("a;b", 1)


def test_hugging_face_detection():
    assert spec_references_hugging_face({"model": {"backbone": "hf_model://nvidia/C-RADIOv2-B"}})
    assert spec_references_hugging_face(["https://huggingface.co/x"])
    assert not spec_references_hugging_face({"a": "/results/x.pth", "b": 3})


def test_the_docker_run_line_is_exact():
    command = build_tao_command(
        image=IMAGE,
        task="visual_changenet",
        action="train",
        spec_file="train.yaml",
        results_dir="runs/r1/",
        overrides={"train.num_epochs": 3},
        mounts={"data": "/data"},
        env={"PLAIN": "a b"},
        secret_env_names=["NGC_KEY"],
        num_gpus=2,
        ipc="host",
        container_name="tao-1",
        extra_docker_args=["--ulimit", "memlock=-1"],
    )
    assert command == (
        'mkdir -p "$HOME"/runs/r1/train && touch "$HOME"/runs/r1/train/.brev-tao-started && '
        "docker run --rm --gpus 2 --name tao-1 --shm-size 8g --ipc host "
        '-v "$HOME"/runs/r1/:/results -v "$HOME"/runs/r1/specs:/specs:ro -v "$HOME"/data:/data '
        "-e 'PLAIN=a b' -e NGC_KEY --ulimit memlock=-1 "
        f"{IMAGE} visual_changenet train -e /specs/train.yaml results_dir=/results train.num_epochs=3 train.num_gpus=2"
    )
    assert STARTED_MARKER == ".brev-tao-started"


def test_gap_analysis_writes_into_its_action_directory_and_gets_no_gpu_override():
    command = build_tao_command(
        image=IMAGE,
        task="gap_analysis",
        action="analyze",
        spec_file="g.yaml",
        results_dir="/abs",
        num_gpus=1,
        shm_size=None,
    )
    assert command.endswith("gap_analysis analyze -e /specs/g.yaml results_dir=/results/analyze")
    assert "--shm-size" not in command and "num_gpus" not in command
    assert " --gpus 1 " in command
    assert "--gpus all" in build_tao_command(image=IMAGE, task="t", action="a", spec_file="s", results_dir="r")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"task": "Bad-Task"}, "Invalid TAO task"),
        ({"action": ""}, "Invalid TAO action"),
        ({"task": None}, "Invalid TAO task"),  # an unset templated value: refused, not a TypeError
        ({"action": None}, "Invalid TAO action"),
        ({"spec_file": "a b.yaml"}, "Invalid spec file name"),
        ({"mounts": {"data": "relative"}}, "must be absolute"),
        ({"env": {"1BAD": "x"}}, "Invalid environment variable name"),
        ({"secret_env_names": ["BAD-NAME"]}, "Invalid environment variable name"),
        ({"image": "tao-toolkit:latest"}, "Invalid TAO image"),
        ({"results_dir": "a\nb"}, "Invalid remote path"),
    ],
)
def test_bad_tao_arguments_are_refused(kwargs, match):
    base = {"image": IMAGE, "task": "t", "action": "a", "spec_file": "s.yaml", "results_dir": "r"}
    with pytest.raises(ValueError, match=match):
        build_tao_command(**{**base, **kwargs})


def test_images_paths_and_overrides():
    assert validate_image(f"  {IMAGE} ") == IMAGE
    with pytest.raises(ValueError, match="Invalid TAO image"):
        validate_image(None)  # type: ignore[arg-type]
    assert image_registry(IMAGE) == "nvcr.io"
    assert remote_path("/abs/x") == "/abs/x"
    assert remote_path("~/x y") == "\"$HOME\"/'x y'"
    assert remote_path("rel") == '"$HOME"/rel'
    for bad in ("", "a\nb", "a\x00b"):
        with pytest.raises(ValueError, match="Invalid remote path"):
            remote_path(bad)
    assert [format_override("k", v) for v in (True, False, None, [1, "a"], {"x": 1}, 2.5)] == [
        "k=true",
        "k=false",
        "k=null",
        'k=[1,"a"]',
        'k={"x":1}',
        "k=2.5",
    ]
    with pytest.raises(ValueError, match="Invalid override key"):
        format_override("bad key", 1)


#: (case, a spec or a value in it, references Hugging Face)
HF_SPECS = [
    ("a model deep in a mapping", {"a": [{"b": "hf_model://x/y"}]}, True),
    ("upper case, in a tuple", ("HF://x",), True),
    ("a dataset", "hf_dataset://d", True),
    ("the hub's web address", "https://huggingface.co/x", True),
    ("S3, a number, a null", {"a": ["s3://b/k", 1, None]}, False),
    ("a number alone", 3, False),
    ("a mapping of local paths", {"a": "/results/x.pth"}, False),
    ("hf:// not at the start", "s3://b/hf://x", False),
    ("nothing", {}, False),
]


@pytest.mark.parametrize(("case", "spec", "hf"), HF_SPECS, ids=[r[0] for r in HF_SPECS])
def test_hugging_face_references_anywhere_in_a_spec(case, spec, hf):
    assert spec_references_hugging_face(spec) is hf, case


#: (case, the images later steps declare, what the step with the data-services image pulls ahead)
PREFETCH = [
    ("a later step's full reference", [PYT], [PYT]),
    ("each once, in order", [PYT, "docker.io/library/ubuntu:22.04", PYT], [PYT, "docker.io/library/ubuntu:22.04"]),
    ("not its own image", [DS], []),
    ("its own image, padded", [" " + DS], []),
    ("a padded reference, stripped", [" " + PYT + " "], [PYT]),
    ("a template", ["{{ params.image }}"], []),
    ("a templated tag", ["nvcr.io/nvidia/tao/tao-toolkit:{{ params.tag }}"], []),
    ("a Jinja block", ["{% if x %}nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt{% endif %}"], []),
    ("no tag", ["nvcr.io/x/y"], []),
    ("no registry", ["ubuntu:22.04"], []),
    ("not a string", [None, 3], []),
    ("nothing declared", [], []),
]


@pytest.mark.parametrize(("case", "declared", "pulled"), PREFETCH, ids=[r[0] for r in PREFETCH])
def test_the_images_pulled_ahead_are_later_full_untemplated_references_each_once(case, declared, pulled):
    assert images_to_prefetch(DS, declared) == pulled, case
