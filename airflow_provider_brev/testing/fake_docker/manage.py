"""The fake ``docker``'s commands that look at or end containers and images: ``inspect``, ``ps``, ``logs``,
``wait``, ``stop``, ``kill``, ``rm`` and ``images``, with Docker's messages and exit codes."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime

from airflow_provider_brev.testing.fake_brev.flags import Flag, write_fd
from airflow_provider_brev.testing.fake_docker import containers as _ct
from airflow_provider_brev.testing.fake_docker.client import DockerError, err, out, parse, parse_ref, sha
from airflow_provider_brev.testing.fake_docker.gotemplate import TemplateError, render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from airflow_provider_brev.testing.fake_docker.client import Docker

_PS_HEADERS = {
    "ID": "CONTAINER ID",
    "Image": "IMAGE",
    "Command": "COMMAND",
    "CreatedAt": "CREATED AT",
    "RunningFor": "CREATED",
    "Ports": "PORTS",
    "State": "STATE",
    "Status": "STATUS",
    "Size": "SIZE",
    "Names": "NAMES",
    "Labels": "LABELS",
    "Mounts": "MOUNTS",
    "Networks": "NETWORKS",
    "LocalVolumes": "LOCAL VOLUMES",
}
_PS_DEFAULT = "table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t{{.Status}}\t{{.Ports}}\t{{.Names}}"
_IMAGE_HEADERS = {"Repository": "REPOSITORY", "Tag": "TAG", "ID": "IMAGE ID", "CreatedSince": "CREATED"}
_IMAGE_HEADERS.update(Size="SIZE", Digest="DIGEST", CreatedAt="CREATED AT")
_IMAGES_DEFAULT = "table {{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.CreatedSince}}\t{{.Size}}"
_STATUSES = ("created", "restarting", "running", "removing", "paused", "exited", "dead")


#: the flags of each command of this module
FLAGS: dict[str, list[Flag]] = {
    "ps": [
        *(Flag("all", "a"), Flag("quiet", "q"), Flag("filter", "f", "list"), Flag("format", "", "str")),
        *(Flag("no-trunc"), Flag("latest", "l"), Flag("last", "n", "int", -1), Flag("size", "s")),
    ],
    "inspect": [Flag("format", "f", "str"), Flag("type", "", "str"), Flag("size", "s")],
    "stop": [Flag("time", "t", "int", -1), Flag("signal", "s", "str")],
    "kill": [Flag("signal", "s", "str", "KILL")],
    "rm": [Flag("force", "f"), Flag("volumes", "v"), Flag("link", "l")],
    "wait": [],
    "logs": [Flag("follow", "f"), Flag("tail", "n", "str", "all"), Flag("timestamps", "t"), Flag("details")],
    "images": [Flag("all", "a"), Flag("quiet", "q"), Flag("format", "", "str"), Flag("no-trunc"), Flag("digests")],
}


def _see(sub: str) -> str:
    return f"See 'docker {sub} --help'."


def _need_args(sub: str, pos: list[str], usage: str) -> None:
    if not pos:
        raise DockerError(
            f'"docker {sub}" requires at least 1 argument.\n{_see(sub)}\n\nUsage:  docker {sub} {usage}', 1
        )


def _no_such(ref: str) -> str:
    return f"Error response from daemon: No such container: {ref}"


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso[:26] + "+00:00").timestamp() if iso and not iso.startswith("0001") else 0.0


def human_duration(seconds: float) -> str:
    """go-units' ``HumanDuration`` (``docker ps``'s ``Up 5 seconds``)."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    minutes, hours = s // 60, round(s / 3600)
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    if hours == 1:
        return "About an hour"
    return f"{hours} hours" if hours < 48 else f"{hours // 24} days"


def human_size(size: float) -> str:
    """go-units' ``HumanSizeWithPrecision(size, 3)`` (decimal units, as ``docker images`` prints sizes)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.3g}{unit}"
        size /= 1000
    return f"{size:.3g}TB"


def _table(rows: list[str]) -> str:
    """text/tabwriter with Docker's settings (min width 10, padding 3): cells split on tabs, the last unpadded."""
    cells = [row.split("\t") for row in rows]
    widths: dict[int, int] = {}
    for row in cells:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths.get(i, 10), len(cell) + 3)
    return "".join("".join(c.ljust(widths[i]) for i, c in enumerate(r[:-1])) + r[-1] + "\n" for r in cells)


def _format(template: str, items: list[dict[str, Any]], headers: dict[str, str], quiet_field: str = "") -> str:
    """``--format`` of a listing: ``table ...`` (a header row and aligned columns), ``json`` or a plain template."""
    if template == "json":
        dump = [{k: v for k, v in item.items() if not callable(v)} for item in items]
        return "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in dump)
    table = template.startswith("table")
    body = template[5:].lstrip() if table else template
    body = body.replace("\\t", "\t").replace("\\n", "\n")
    try:
        rows = [render(body, item) for item in items]
        if table:
            header = {**headers, "Label": lambda _key="": "LABEL"}
            return _table([render(body, header), *rows])
    except TemplateError as exc:
        raise DockerError(str(exc)) from None
    return "".join(f"{row}\n" for row in rows)


def _status_text(cur: dict[str, Any]) -> str:
    state = cur["State"]
    if state["Status"] == "running":
        return "Up " + human_duration(time.time() - _epoch(state["StartedAt"]))
    if state["Status"] == "exited":
        return f"{_ct.describe_exit(int(state['ExitCode']))} {human_duration(time.time() - _epoch(state['FinishedAt']))} ago"
    return state["Status"].capitalize()


def ps_row(cur: dict[str, Any], no_trunc: bool) -> dict[str, Any]:
    """One ``docker ps`` row (the fields ``--format`` sees)."""
    labels = cur["Config"]["Labels"] or {}
    command = " ".join([cur["Path"], *cur["Args"]])
    if not no_trunc and len(command) > 20:
        command = command[:19] + "\u2026"
    created = _epoch(cur["Created"])
    return {
        "ID": cur["Id"] if no_trunc else cur["Id"][:12],
        "Image": cur["Config"]["Image"],
        "Command": json.dumps(command, ensure_ascii=False),
        "CreatedAt": datetime.fromtimestamp(created).astimezone().strftime("%Y-%m-%d %H:%M:%S %z %Z"),
        "RunningFor": human_duration(time.time() - created) + " ago",
        "Ports": "",
        "State": cur["State"]["Status"],
        "Status": _status_text(cur),
        "Size": "0B",
        "Names": cur["Name"].lstrip("/"),
        "Labels": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        "Mounts": ",".join(m["Source"] for m in cur.get("Mounts") or []),
        "Networks": cur["HostConfig"].get("NetworkMode") or "bridge",
        "LocalVolumes": "0",
        "Label": lambda key="": labels.get(key, ""),
    }


def _filters(raw: list[str]) -> Callable[[dict[str, Any]], bool]:
    """``--filter key=value``: ``label`` filters must all match, other keys match any of their values."""
    by_key: dict[str, list[str]] = {}
    for item in raw:
        key, eq, value = item.partition("=")
        if not eq:
            raise DockerError(f"Error: bad format of filter (expected name=value)\n{_see('ps')}", 1)
        if key not in ("label", "name", "id", "status"):
            raise DockerError(f"Error response from daemon: invalid filter '{key}'")
        if key == "status" and value not in _STATUSES:
            raise DockerError(f"Error response from daemon: Unrecognised filter value for status: {value}")
        by_key.setdefault(key, []).append(value)

    def label_ok(labels: dict[str, str], want: str) -> bool:
        key, eq, value = want.partition("=")
        return key in labels and (not eq or labels[key] == value)

    def keep(cur: dict[str, Any]) -> bool:
        labels = cur["Config"]["Labels"] or {}
        checks = {
            "label": all(label_ok(labels, w) for w in by_key.get("label", [])),
            "name": any(w.lstrip("/") in cur["Name"] for w in by_key.get("name", [])),
            "id": any(cur["Id"].startswith(w) for w in by_key.get("id", [])),
            "status": cur["State"]["Status"] in by_key.get("status", []),
        }
        return all(ok for key, ok in checks.items() if key in by_key)

    return keep


def cmd_ps(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["ps"], _see("ps"))
    if pos:
        raise DockerError(f'"docker ps" accepts no arguments.\n{_see("ps")}', 1)
    d.require_daemon()
    keep = _filters(v["filter"])
    found = [c for c in _ct.all_containers(d) if keep(c)]
    last = 1 if v["latest"] else v["last"]
    if last >= 0:
        found = found[:last]
    elif not v["all"] and "status" not in {f.partition("=")[0] for f in v["filter"]}:
        found = [c for c in found if c["State"]["Status"] == "running"]
    rows = [ps_row(c, v["no-trunc"]) for c in found]
    if v["quiet"]:
        out("".join(f"{row['ID']}\n" for row in rows))
    else:
        out(_format(v["format"] or _PS_DEFAULT, rows, _PS_HEADERS))
    return 0


def _image_object(d: Docker, ref: str) -> dict[str, Any] | None:
    images = d.images()
    try:
        parsed = parse_ref(ref)
    except DockerError:
        parsed = None
    canonical = parsed.canonical if parsed else ""
    for key in images:
        if key == canonical or sha(key) == ref.removeprefix("sha256:") or sha(key).startswith(ref):
            img = parse_ref(key)
            return {
                "Id": f"sha256:{sha(key)}",
                "RepoTags": [img.familiar] if "@" not in key else [],
                "RepoDigests": [f"{img.familiar.rsplit(':', 1)[0]}@sha256:{sha(key)}"],
                "Created": _ct.now_iso(float(images[key].get("first_pulled") or 0)),
                "Size": int(images[key].get("bytes") or 0),
                "Architecture": "amd64",
                "Os": "linux",
            }
    return None


def cmd_inspect(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["inspect"], _see("inspect"))
    _need_args("inspect", pos, "[OPTIONS] NAME|ID [NAME|ID...]")
    if v["type"] not in ("", "container", "image"):
        raise DockerError(f'"{v["type"]}" is not a valid value for --type', 1)
    d.require_daemon()
    found: list[Any] = []
    missing: list[str] = []
    for ref in pos:
        cid = _ct.resolve(d, ref) if v["type"] in ("", "container") else None
        obj = _ct.load(d, cid) if cid else None
        if obj is None and v["type"] in ("", "image"):
            obj = _image_object(d, ref)
        (found.append(obj) if obj is not None else missing.append(ref))
    d.record["inspected"] = [obj.get("Id") for obj in found]
    if v["format"]:
        try:
            out("".join(render(v["format"], obj) + "\n" for obj in found))
        except TemplateError as exc:
            raise DockerError(str(exc)) from None
    else:
        out(_ct.dump(found) + "\n")
    what = {"container": "container", "image": "image"}.get(v["type"], "object")
    for ref in missing:
        err(f"Error: No such {what}: {ref}\n")
    return 1 if missing else 0


def _each(d: Docker, refs: list[str], act: Callable[[str, str], None], *, quiet_missing: bool = False) -> int:
    """Run ``act(id, ref)`` on each container named in ``refs``; Docker's error per missing one; exit 1 if any."""
    d.require_daemon()
    code = 0
    for ref in refs:
        cid = _ct.resolve(d, ref)
        try:
            if cid is None:
                if quiet_missing:
                    continue
                raise DockerError(_no_such(ref))
            act(cid, ref)
        except DockerError as exc:
            err(exc.message + "\n")
            code = 1
    return code


def _signal_number(value: str) -> int:
    name = value.upper().removeprefix("SIG")
    if name.isdigit():
        return int(name)
    try:
        return int(signal.Signals[f"SIG{name}"])
    except KeyError:
        raise DockerError(f"Error response from daemon: Invalid signal: {value}") from None


def cmd_stop(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["stop"], _see("stop"))
    _need_args("stop", pos, "[OPTIONS] CONTAINER [CONTAINER...]")
    signum = _signal_number(v["signal"]) if v["signal"] else signal.SIGTERM
    grace = 10 if v["time"] < 0 else v["time"]
    d.record.update(containers=pos, grace=grace)

    def act(cid: str, ref: str) -> None:
        _ct.stop(d, cid, float(grace), signum)
        out(f"{ref}\n")

    return _each(d, pos, act)


def cmd_kill(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["kill"], _see("kill"))
    _need_args("kill", pos, "[OPTIONS] CONTAINER [CONTAINER...]")
    signum = _signal_number(v["signal"])

    def act(cid: str, ref: str) -> None:
        if not _ct.signal_container(d, cid, signum):
            raise DockerError(
                f"Error response from daemon: cannot kill container: {ref}: container {cid} is not running"
            )
        if signum == signal.SIGKILL:
            _ct.wait_exit(d, cid, 10.0)
        out(f"{ref}\n")

    return _each(d, pos, act)


def cmd_rm(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["rm"], _see("rm"))
    _need_args("rm", pos, "[OPTIONS] CONTAINER [CONTAINER...]")
    d.record.update(containers=pos, force=v["force"])

    def act(cid: str, ref: str) -> None:
        cur = _ct.load(d, cid)
        if cur is not None and cur["State"]["Status"] == "running":
            if not v["force"]:
                raise DockerError(
                    f'Error response from daemon: cannot remove container "{cur["Name"]}": container is running: '
                    "stop the container before removing or force remove"
                )
            _ct.stop(d, cid, -1.0, signal.SIGKILL)
        _ct.remove(d, cid)
        out(f"{ref}\n")

    return _each(d, pos, act, quiet_missing=v["force"])


def cmd_wait(d: Docker, args: list[str]) -> int:
    _, pos = parse(args, FLAGS["wait"], _see("wait"))
    _need_args("wait", pos, "CONTAINER [CONTAINER...]")

    def act(cid: str, _ref: str) -> None:
        d.record.setdefault("waiting", []).append(cid)
        d.write_record("start", None)  # blocked from here on (what a test waits for before ending the container)
        _ct.wait_exit(d, cid)
        code = _ct.exit_code(d, cid)
        out(f"{_ct.LOST_EXIT_CODE if code is None else code}\n")

    return _each(d, pos, act)


def cmd_logs(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["logs"], _see("logs"))
    if len(pos) != 1:
        raise DockerError(f'"docker logs" requires exactly 1 argument.\n{_see("logs")}', 1)
    d.require_daemon()
    cid = _ct.resolve(d, pos[0])
    if cid is None:
        raise DockerError(_no_such(pos[0]))
    cdir = _ct.container_dir(d, cid)
    streams = []
    for name, fd in (("stdout.log", 1), ("stderr.log", 2)):
        try:
            fh = open(os.path.join(cdir, name), "rb")  # noqa: SIM115 (closed below)
        except OSError:
            continue
        if v["tail"] != "all":
            lines = fh.read().splitlines(keepends=True)
            write_fd(fd, b"".join(lines[-int(v["tail"]) :] if int(v["tail"]) > 0 else []))
        streams.append((fh, fd))

    def drain() -> None:
        for fh, fd in streams:
            while chunk := fh.read(1 << 20):
                write_fd(fd, chunk)

    try:
        drain()
        while v["follow"] and _ct.monitor_alive(cdir):
            time.sleep(0.05)  # the simulator's own tail loop (as ``docker logs -f`` follows a file)
            drain()
        drain()
    finally:
        for fh, _fd in streams:
            fh.close()
    return 0


def cmd_images(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, FLAGS["images"], _see("images"))
    if len(pos) > 1:
        raise DockerError(f'"docker images" requires at most 1 argument.\n{_see("images")}', 1)
    d.require_daemon()
    rows = []
    for key, img in sorted(d.images().items(), key=lambda kv: -float(kv[1].get("first_pulled") or 0)):
        ref = parse_ref(key)
        repo, _, tag = ref.familiar.rpartition("@" if "@" in ref.familiar else ":")
        if pos and pos[0] not in (repo, ref.familiar):
            continue
        digest = f"sha256:{sha(key)}"
        rows.append(
            {
                "Repository": repo,
                "Tag": "<none>" if "@" in key else tag,
                "ID": digest if v["no-trunc"] else sha(key)[:12],
                "Digest": digest,
                "CreatedSince": human_duration(time.time() - float(img.get("first_pulled") or 0)) + " ago",
                "CreatedAt": _ct.now_iso(float(img.get("first_pulled") or 0)),
                "Size": human_size(int(img.get("bytes") or 0)),
            }
        )
    if v["quiet"]:
        out("".join(f"{row['ID']}\n" for row in rows))
    else:
        out(_format(v["format"] or _IMAGES_DEFAULT, rows, _IMAGE_HEADERS))
    return 0
