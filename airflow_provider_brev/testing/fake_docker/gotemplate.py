"""The part of Go's ``text/template`` that ``docker inspect -f`` and ``docker ps --format`` users write: fields
(``{{.State.ExitCode}}``, ``{{$.Id}}``), variables, pipelines (``{{.Config.Labels | json}}``), ``{{if}}``/
``{{else}}``/``{{range}}``/``{{with}}`` blocks, ``{{- trim -}}`` markers and Docker's functions (``index``, ``json``,
``join``, ``len``, ``lower``, ``upper``, ``title``, ``split``, ``println``, ``printf`` with ``%s %d %v %q``,
``eq``/``ne``, ``not``/``and``/``or``). Values print as Go prints them (``map[k:v]``, ``[a b]``, ``true``,
``<no value>``). A callable in the data is a method (``{{.Label "k"}}`` of ``docker ps``).
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class TemplateError(Exception):
    """A template that does not parse or cannot execute (Docker prints it and exits 1)."""


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`|:=|\||\(|\)|[^\s|()]+')
_MISSING = object()


def go_str(value: Any) -> str:
    """``fmt.Sprint`` of a JSON-like value."""
    if value is _MISSING:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_str(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_str(v) for v in value) + "]"
    return str(value)


def _truth(value: Any) -> bool:
    return value not in (_MISSING, None, False, 0, "", [], {})


def _printf(fmt: str, *args: Any) -> str:
    queue = list(args)

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        arg = queue.pop(0) if queue else _MISSING
        return json.dumps(go_str(arg)) if m.group(1) == "q" else go_str(arg)

    return re.sub(r"%%|%[-+# 0-9.]*([sdvq])", one, fmt)


def _index(value: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(value, dict):
            value = value.get(key, "")
        elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            value = value[key]
        else:
            raise TemplateError(f"error calling index: cannot index {go_str(value)} with {go_str(key)}")
    return value


FUNCS: dict[str, Any] = {
    "index": _index,
    "json": lambda v: json.dumps(None if v is _MISSING else v, ensure_ascii=False, separators=(",", ":")),
    "join": lambda v, sep: sep.join(go_str(x) for x in v or []),
    "len": lambda v: len(v or []),
    "lower": lambda v: go_str(v).lower(),
    "upper": lambda v: go_str(v).upper(),
    "title": lambda v: go_str(v).title(),
    "split": lambda v, sep: go_str(v).split(sep),
    "println": lambda *v: " ".join(go_str(x) for x in v) + "\n",
    "print": lambda *v: "".join(go_str(x) for x in v),
    "printf": _printf,
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
    "not": lambda v: not _truth(v),
    "and": lambda *v: next((x for x in v if not _truth(x)), v[-1]),
    "or": lambda *v: next((x for x in v if _truth(x)), v[-1]),
}


def _split(template: str) -> list[tuple[str, str]]:
    """Text and action pieces: ``("text", ...)`` / ``("action", ...)`` with ``{{-``/``-}}`` trimming applied."""
    pieces: list[tuple[str, str]] = []
    pos = 0
    while True:
        start = template.find("{{", pos)
        if start < 0:
            pieces.append(("text", template[pos:]))
            return pieces
        end = template.find("}}", start)
        if end < 0:
            raise TemplateError("template: :1: unclosed action")
        text, action = template[pos:start], template[start + 2 : end]
        if action.startswith("- "):
            text, action = text.rstrip(), action[2:]
        pieces.append(("text", text))
        pos = end + 2
        if action.endswith(" -"):
            action = action[:-2]
            rest = template[pos:]
            pos += len(rest) - len(rest.lstrip())
        pieces.append(("action", action.strip()))


def _parse(pieces: list[tuple[str, str]], i: int, stop: tuple[str, ...]) -> tuple[list[Any], int, str]:
    """Nodes up to a closing keyword in ``stop``; returns (nodes, next index, the keyword met)."""
    nodes: list[Any] = []
    while i < len(pieces):
        kind, body = pieces[i]
        i += 1
        if kind == "text":
            if body:
                nodes.append(("text", body))
            continue
        word = body.split(None, 1)[0] if body else ""
        if word in ("end", "else") and word in stop:
            return nodes, i, body
        if word in ("if", "range", "with"):
            expr = body[len(word) :].strip()
            inner, i, closer = _parse(pieces, i, ("end", "else"))
            other: list[Any] = []
            if closer.startswith("else"):
                if closer[4:].strip():
                    raise TemplateError("template: :1: {{else if}} is not simulated; nest an {{if}} in {{else}}")
                other, i, _ = _parse(pieces, i, ("end",))
            nodes.append((word, expr, inner, other))
            continue
        if word in ("end", "else"):
            raise TemplateError(f"template: :1: unexpected {{{{{word}}}}}")
        if not body.startswith("/*"):
            nodes.append(("expr", body))
    if stop:
        raise TemplateError("template: :1: unexpected EOF")
    return nodes, i, ""


class _Scope:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.vars: dict[str, Any] = {"$": root}


def _field(value: Any, names: list[str], args: list[Any], shown: str) -> Any:
    for k, name in enumerate(names):
        if isinstance(value, dict) and name in value:
            value = value[name]
        elif isinstance(value, dict):
            if any(isinstance(v, dict | list) for v in value.values()) or callable(value.get(name)):
                raise TemplateError(f'template: :1: executing "" at <{shown}>: map has no entry for key "{name}"')
            return _MISSING
        else:
            raise TemplateError(f'template: :1: executing "" at <{shown}>: can\'t evaluate field {name}')
        if callable(value):
            value = value(*args) if k == len(names) - 1 else value()
    return value


def _term(tok: str, scope: _Scope, dot: Any, args: list[Any]) -> Any:
    if tok.startswith('"'):
        return json.loads(tok)
    if tok.startswith("`"):
        return tok[1:-1]
    if re.fullmatch(r"-?\d+", tok):
        return int(tok)
    if tok in ("true", "false"):
        return tok == "true"
    if tok == "nil":
        return None
    if tok == ".":
        return dot
    if tok.startswith("."):
        return _field(dot, tok[1:].split("."), args, tok)
    if tok.startswith("$"):
        var, _, path = tok.partition(".")
        if var not in scope.vars:
            raise TemplateError(f'template: :1: undefined variable "{var}"')
        return _field(scope.vars[var], path.split("."), args, tok) if path else scope.vars[var]
    raise TemplateError(f'template: :1: function "{tok}" not defined')


def _command(tokens: list[str], scope: _Scope, dot: Any, piped: Any = _MISSING) -> Any:
    if not tokens:
        raise TemplateError("template: :1: missing value for command")
    head, rest = tokens[0], tokens[1:]
    args = [_term(t, scope, dot, []) for t in rest]
    if piped is not _MISSING:
        args.append(piped)
    if head in FUNCS:
        try:
            return FUNCS[head](*args)
        except TypeError:
            raise TemplateError(f"template: :1: wrong number of args for {head}") from None
    if re.fullmatch(r"[A-Za-z_]\w*", head) and head not in ("true", "false", "nil"):
        raise TemplateError(f'template: :1: function "{head}" not defined')
    if args and not head.startswith((".", "$")):
        raise TemplateError(f"template: :1: can't give argument to non-function {head}")
    return _term(head, scope, dot, args)


def _pipeline(expr: str, scope: _Scope, dot: Any) -> Any:
    tokens = _TOKEN.findall(expr)
    declare: str | None = None
    if len(tokens) > 2 and tokens[1] == ":=" and tokens[0].startswith("$"):
        declare, tokens = tokens[0], tokens[2:]
    value: Any = _MISSING
    stage: list[str] = []
    for tok in [*tokens, "|"]:
        if tok != "|":
            stage.append(tok)
            continue
        value = _command(stage, scope, dot, value)
        stage = []
    if declare:
        scope.vars[declare] = value
        return ""
    return value


def _run(nodes: list[Any], scope: _Scope, dot: Any, out: list[str]) -> None:
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "expr":
            value = _pipeline(node[1], scope, dot)
            if node[1].split(None, 1)[0].startswith("$") and ":=" in node[1]:
                continue
            out.append(go_str(value))
        elif kind in ("if", "with"):
            value = _pipeline(node[1], scope, dot)
            branch = node[2] if _truth(value) else node[3]
            _run(branch, scope, value if kind == "with" and _truth(value) else dot, out)
        else:  # range
            expr = node[1]
            names: list[str] = []
            match = re.fullmatch(r"(\$\w+)\s*(?:,\s*(\$\w+))?\s*:=\s*(.+)", expr)
            if match:
                names = [n for n in match.groups()[:2] if n]
                expr = match.group(3)
            value = _pipeline(expr, scope, dot)
            items = sorted(value.items()) if isinstance(value, dict) else list(enumerate(value or []))
            if not items:
                _run(node[3], scope, dot, out)
            for key, item in items:
                if len(names) == 2:
                    scope.vars[names[0]], scope.vars[names[1]] = key, item
                elif names:
                    scope.vars[names[0]] = item
                _run(node[2], scope, item, out)


def render(template: str, data: Any) -> str:
    """``template`` executed on ``data``; :class:`TemplateError` when it does not parse or execute."""
    nodes, _, _ = _parse(_split(template), 0, ())
    out: list[str] = []
    _run(nodes, _Scope(data), data, out)
    return "".join(out)
