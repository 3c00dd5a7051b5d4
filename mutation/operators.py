"""The mutation operators: where a module can be mutated, and the mutated module (pure, AST-based).

Every operator turns one AST node into a slightly wrong one. A *site* is found by walking the module in a fixed
order (:class:`_Walker`), so listing the mutants and applying one of them visit the same nodes: a mutant is
``(node number, operator, variant)`` plus a stable id that survives edits elsewhere in the file
(:func:`_stable_id`).

Operators (:data:`OPERATORS`):

* ``compare-negate`` -- ``<`` ↔ ``>=``, ``<=`` ↔ ``>``, ``==`` ↔ ``!=``, ``in`` ↔ ``not in``, ``is`` ↔ ``is not``;
* ``compare-boundary`` -- ``<`` ↔ ``<=``, ``>`` ↔ ``>=``;
* ``boolop-swap`` -- ``and`` ↔ ``or``; ``boolop-drop`` -- one operand of an ``and``/``or`` left out;
* ``not-drop`` -- ``not x`` → ``x``;
* ``raise-delete`` / ``return-delete`` -- the statement becomes ``pass``;
* ``string`` -- a short string literal (at most :data:`MAX_STRING` characters) is corrupted to ``"XX<s>XX"``;
* ``element-drop`` -- one element left out of a tuple/list/set literal of plain values, or of a table of one
  constructor's values (``(Marker(...), Marker(...))``);
* ``number`` -- an int/float literal ``n`` becomes ``n + 1``; ``bool`` -- ``True`` ↔ ``False``;
* ``arith`` -- ``+`` ↔ ``-``, ``*`` → ``/``, ``/`` and ``//`` → ``*`` (not on string formatting).

Not mutated: docstrings, annotations and type expressions (``Literal[...]``), ``__all__``, ``if TYPE_CHECKING:``
blocks, f-strings, the text of error
messages (inside ``raise`` or an ``...Error(...)`` call) and, in the functions listed in
:data:`SHELL_FUNCTIONS`, string literals and list elements, which there are lines of bash (their *markers* are
module constants, which are mutated).
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

MAX_STRING = 64

OPERATORS = (
    "compare-negate",
    "compare-boundary",
    "boolop-swap",
    "boolop-drop",
    "not-drop",
    "raise-delete",
    "return-delete",
    "string",
    "element-drop",
    "number",
    "bool",
    "arith",
)

#: Functions (and module constants) whose string literals are bash script text, per module (:func:`module_key`).
#: The script builders: their string literals are bash, or the names of the variables the scripts of
#: ``airflow_provider_brev/remote/`` read from their header (a corrupted name is a broken script, not a decision).
SHELL_FUNCTIONS: dict[str, frozenset[str]] = {
    "jobs.scripts": frozenset(
        {"_render", "_job_script", "build_launch_command", "build_poll_command", "build_kill_command"}
        | {"build_cleanup_command"}
    ),
    "staging.scripts": frozenset({"build_transfer_script", "build_cleanup_script"}),
    "staging.listing": frozenset({"build_list_script"}),
    "jobs.shell": frozenset(
        {"REDACT_AWK", "stale_secret_cleanup", "redact_filter", "build_once_command", "build_foreground_kill_command"}
    ),
    "tao.command": frozenset({"build_tao_command"}),
    "tao.report": frozenset({"build_report_command"}),
}


def module_key(path: Path | str) -> str:
    """The name of a module of the pure core relative to ``core/``, dotted: ``jobs/scripts.py`` -> ``jobs.scripts``."""
    parts = list(PurePath(path).with_suffix("").parts)
    if "core" in parts:
        parts = parts[len(parts) - parts[::-1].index("core") :]
    return ".".join(parts)


#: Subscripted names that make a type expression (their subscripts are never mutated).
_TYPE_NAMES = frozenset(
    {"Literal", "Generator", "Callable", "tuple", "list", "dict", "set", "frozenset", "type", "Sequence", "Mapping"}
    | {"Iterable", "Iterator", "Optional", "Union", "Awaitable"}
)

_NEGATE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
}
_SYMBOL: dict[type[ast.AST], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
}


@dataclass(frozen=True)
class Mutant:
    """One mutation of one module.

    :param id: stable id ``<module>:<function>:<operator>:<hash>`` (see :func:`_stable_id`).
    :param path: the module's file, relative to the repository root.
    :param line: the mutated node's first line.
    :param end_line: its last line.
    :param operator: one of :data:`OPERATORS`.
    :param description: what changes, e.g. ``'<' -> '>='`` or ``drop '403 Forbidden'``.
    :param scope: the enclosing function or class (``<module>`` at top level).
    :param node: the node's number in the walk order (internal).
    :param variant: which variant of the operator at that node (internal).
    :param module_level: the line runs when the module is imported (not inside a function body).
    """

    id: str
    path: str
    line: int
    end_line: int
    operator: str
    description: str
    scope: str
    node: int = field(compare=False, repr=False)
    variant: int = field(compare=False, repr=False)
    module_level: bool = field(compare=False, repr=False)


# A site: (operator, variant, description, build the replacement from a copy of the node).
_Site = tuple[str, int, str, Callable[[ast.AST], ast.AST | None]]


def _short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_docstring(parent: ast.AST | None, node: ast.AST) -> bool:
    body = getattr(parent, "body", None)
    return (
        isinstance(parent, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and isinstance(body, list)
        and bool(body)
        and body[0] is node
        and isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _is_message_call(call: ast.Call) -> bool:
    name = _call_name(call)
    return name.endswith(("Error", "Exception", "Warning")) or name == "_fail"


def _plain(node: ast.AST) -> bool:
    """A literal element that can be left out of a collection without changing its shape."""
    return isinstance(node, ast.Constant | ast.Name | ast.Attribute) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
    )


def _same_constructor(elements: list[ast.expr]) -> bool:
    """``(Marker(...), Marker(...))``: a table of one kind of value (a rule, a marker), each one droppable."""
    names = {e.func.id if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) else None for e in elements}
    return len(names) == 1 and None not in names


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


@dataclass
class _Context:
    scope: list[str] = field(default_factory=list)
    function_depth: int = 0
    no_text: int = 0  # inside a docstring-free zone for strings: messages, f-strings, shell text
    shell: int = 0
    skip: int = 0  # annotations, __all__, TYPE_CHECKING blocks, f-strings (message text)


class _Walker:
    """Walks a module in a fixed order, numbering nodes; lists the sites or replaces one node."""

    def __init__(self, key: str, target: tuple[int, int] | None = None) -> None:
        self.key = key
        self.shell_names = SHELL_FUNCTIONS.get(key, frozenset())
        self.target = target
        self.counter = 0
        self.ctx = _Context()
        self.found: list[tuple[int, int, str, str, str, int, int, bool]] = []
        self.applied = False
        self.trailing: set[int] = set()
        self.skipped_tuples: set[int] = set()

    # -- walking -------------------------------------------------------------------------------------------
    def walk(self, node: ast.AST, parent: ast.AST | None = None) -> ast.AST | None:
        number = self.counter
        self.counter += 1
        if isinstance(node, ast.Module):
            self.trailing = {
                id(f.body[-1]) for f in ast.walk(node) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            }
        docstring = _is_docstring(parent, node)
        wanted = self.target is None or self.target[0] == number  # applying: only the target's sites matter
        if wanted and self.ctx.skip == 0 and not docstring:
            sites = list(self._sites(node))
            if self.target is None:
                for operator, variant, description, _ in sites:
                    self.found.append(
                        (
                            number,
                            variant,
                            operator,
                            description,
                            ".".join(self.ctx.scope) or "<module>",
                            int(getattr(node, "lineno", 0)),
                            int(getattr(node, "end_lineno", None) or getattr(node, "lineno", 0) or 0),
                            self.ctx.function_depth == 0,
                        )
                    )
            elif self.target[0] == number:
                for _operator, variant, _description, build in sites:
                    if variant == self.target[1]:
                        self.applied = True
                        return build(copy.deepcopy(node))
        if docstring:
            self.ctx.skip += 1
        try:
            with self._entering(node, parent):
                self._children(node)
        finally:
            if docstring:
                self.ctx.skip -= 1
        return node

    def _children(self, node: ast.AST) -> None:
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                new_items: list[ast.AST] = []
                for item in value:
                    if isinstance(item, ast.AST):
                        replaced = self._child(node, name, item)
                        if replaced is not None:
                            new_items.append(replaced)
                    else:
                        new_items.append(item)
                value[:] = new_items
            elif isinstance(value, ast.AST):
                replaced = self._child(node, name, value)
                if replaced is not None:
                    setattr(node, name, replaced)

    def _child(self, node: ast.AST, name: str, child: ast.AST) -> ast.AST | None:
        annotation = name in ("annotation", "returns")
        if annotation:
            self.ctx.skip += 1
        try:
            return self.walk(child, node)
        finally:
            if annotation:
                self.ctx.skip -= 1

    class _Enter:
        def __init__(self, walker: _Walker, node: ast.AST, parent: ast.AST | None) -> None:
            self.walker, self.node, self.parent = walker, node, parent
            self.undo: list[Callable[[], None]] = []

        def __enter__(self) -> None:
            ctx, node = self.walker.ctx, self.node
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                ctx.scope.append(node.name)
                self.undo.append(lambda: ctx.scope.__delitem__(-1))
                if not isinstance(node, ast.ClassDef):
                    ctx.function_depth += 1
                    self.undo.append(lambda: setattr(ctx, "function_depth", ctx.function_depth - 1))
                if node.name in self.walker.shell_names:
                    self._count("shell")
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                if "__all__" in names:
                    self._count("skip")
                if names & self.walker.shell_names and ctx.function_depth == 0:
                    self._count("shell")
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                self._count("skip")
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):  # Generator[A, B, C]: a type
                self.undo.append(self._skip_slice(node.slice))
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _TYPE_NAMES:
                self._count("skip")  # Literal["off", "keep"], tuple[str, str]: type expressions, not values
            if isinstance(node, ast.JoinedStr):
                self._count("skip")
            if isinstance(node, ast.Raise) or (isinstance(node, ast.Call) and _is_message_call(node)):
                self._count("no_text")

        def _skip_slice(self, node: ast.Tuple) -> Callable[[], None]:
            skipped = self.walker.skipped_tuples
            skipped.add(id(node))
            return lambda: skipped.discard(id(node))

        def _count(self, attr: str) -> None:
            ctx = self.walker.ctx
            setattr(ctx, attr, getattr(ctx, attr) + 1)
            self.undo.append(lambda: setattr(ctx, attr, getattr(ctx, attr) - 1))

        def __exit__(self, *exc: object) -> None:
            for undo in reversed(self.undo):
                undo()

    def _entering(self, node: ast.AST, parent: ast.AST | None) -> _Walker._Enter:
        return _Walker._Enter(self, node, parent)

    # -- the operators -------------------------------------------------------------------------------------
    def _trailing_none(self, node: ast.Return) -> bool:
        """``return`` / ``return None`` as a function's last statement: deleting it changes nothing."""
        empty = node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
        return empty and id(node) in self.trailing

    def _sites(self, node: ast.AST) -> Iterator[_Site]:
        ctx = self.ctx
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                for operator, table, offset in (("compare-negate", _NEGATE, 0), ("compare-boundary", _BOUNDARY, 1)):
                    new = table.get(type(op))
                    if new is None:
                        continue
                    description = f"{_SYMBOL[type(op)]!r} -> {_SYMBOL[new]!r} in {_short(node)}"
                    yield operator, 2 * index + offset, description, _replace_op(index, new)
        elif isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And
            word = "and" if isinstance(node.op, ast.And) else "or"
            yield (
                "boolop-swap",
                0,
                f"{word!r} -> {('or' if word == 'and' else 'and')!r} in {_short(node)}",
                (lambda n: _set(n, "op", other())),
            )
            for index, value in enumerate(node.values):
                yield "boolop-drop", 1 + index, f"drop {_short(value, 40)!r} from {_short(node)}", _drop_operand(index)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield "not-drop", 0, f"drop 'not' in {_short(node)}", lambda n: n.operand  # type: ignore[attr-defined]
        elif isinstance(node, ast.Raise):
            yield "raise-delete", 0, f"delete {_short(node)}", _to_pass
        elif isinstance(node, ast.Return) and not self._trailing_none(node):
            yield "return-delete", 0, f"delete {_short(node)}", _to_pass
        elif isinstance(node, ast.Constant):
            literal = node.value
            if isinstance(literal, bool):
                yield "bool", 0, f"{literal} -> {not literal}", lambda n: ast.Constant(not literal)
            elif isinstance(literal, int | float):
                yield "number", 0, f"{literal!r} -> {literal + 1!r}", lambda n: ast.Constant(literal + 1)
            elif (
                isinstance(literal, str)
                and ctx.no_text == 0
                and ctx.shell == 0
                and len(literal) <= MAX_STRING
                and "\n" not in literal
            ):
                corrupted = "XX" + literal + "XX"
                yield "string", 0, f"{literal!r} -> {corrupted!r}", lambda n: ast.Constant(corrupted)
        elif (
            isinstance(node, ast.Tuple | ast.List | ast.Set)
            and ctx.shell == 0
            and id(node) not in self.skipped_tuples
            and isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
            and len(node.elts) >= 2
            and (all(_plain(e) for e in node.elts) or _same_constructor(node.elts))
        ):
            for index, element in enumerate(node.elts):
                yield "element-drop", index, f"drop {_short(element, 40)} from {_short(node)}", _drop_element(index)
        elif (
            isinstance(node, ast.BinOp)
            and type(node.op) in _ARITH
            and not (_is_text(node.left) or _is_text(node.right))
        ):
            swapped = _ARITH[type(node.op)]
            description = f"{_SYMBOL[type(node.op)]!r} -> {_SYMBOL[swapped]!r} in {_short(node)}"
            yield "arith", 0, description, lambda n: _set(n, "op", swapped())


def _set(node: ast.AST, attr: str, value: object) -> ast.AST:
    setattr(node, attr, value)
    return node


def _replace_op(index: int, new: type[ast.cmpop]) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.Compare)
        node.ops[index] = new()
        return node

    return build


def _drop_operand(index: int) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.BoolOp)
        values = node.values[:index] + node.values[index + 1 :]
        if len(values) == 1:
            return values[0]
        node.values = values
        return node

    return build


def _drop_element(index: int) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.Tuple | ast.List | ast.Set)
        del node.elts[index]
        return node

    return build


def _to_pass(node: ast.AST) -> ast.AST:
    return ast.copy_location(ast.Pass(), node)


def _stable_id(key: str, scope: str, operator: str, description: str, occurrence: int) -> str:
    digest = hashlib.sha256(f"{scope}\x00{operator}\x00{description}\x00{occurrence}".encode()).hexdigest()[:8]
    return f"{key}:{scope}:{operator}:{digest}"


def list_mutants(path: Path, root: Path) -> list[Mutant]:
    """Every mutant of the module at ``path`` (ids relative to ``root``), in walk order."""
    source = path.read_text(encoding="utf-8")
    walker = _Walker(module_key(path))
    walker.walk(ast.parse(source, str(path)))
    seen: dict[tuple[str, str, str], int] = {}
    mutants = []
    for number, variant, operator, description, scope, line, end_line, module_level in walker.found:
        key = (scope, operator, description)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        mutants.append(
            Mutant(
                id=_stable_id(module_key(path), scope, operator, description, occurrence),
                path=str(path.relative_to(root)),
                line=line,
                end_line=end_line,
                operator=operator,
                description=description,
                scope=scope,
                node=number,
                variant=variant,
                module_level=module_level,
            )
        )
    return mutants


def mutated_tree(source: str, key: str, mutant: Mutant) -> ast.Module:
    """The module's AST with ``mutant`` applied (raises ``LookupError`` when its site is not there)."""
    tree = ast.parse(source)
    walker = _Walker(key, target=(mutant.node, mutant.variant))
    result = walker.walk(tree)
    if not walker.applied or not isinstance(result, ast.Module):
        raise LookupError(f"mutant {mutant.id} does not apply")
    return ast.fix_missing_locations(result)
