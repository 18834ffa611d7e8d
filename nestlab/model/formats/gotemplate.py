"""The part of Go's text/template that containerlab topologies use (``--vars``, ``NAME_vars.yml``).

Actions ``{{ pipeline }}`` with ``{{-``/``-}}`` trimming, comments, ``if``/``else if``/``else``, ``range``
(over lists, maps, numbers; ``$i, $v :=`` or the dot), ``with``, ``$var :=``/``=``, fields of ``.`` and
``$``, parentheses and ``|``; Go's functions (``and or not len index eq ne lt le gt ge print printf``)
and containerlab's (``add subtract mul div idiv rem seq slice ToJSON ToJSONPretty strings.Split
strings.ReplaceAll conv.Join conv.ToInt net.CIDRHost``).  Anything else (``define``, ``template``, other
functions) is a :class:`TemplateError` with its line.  No maintained Python library renders Go templates,
hence this module.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(?:("(?:\\.|[^"\\])*")|(`[^`]*`)|(:=|=|\||\(|\))|([^\s|()=]+))')
_NUMBER = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_MISSING = None  # a map's missing key: Go prints it as <no value>


class TemplateError(ValueError):
    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def render(text: str, data: Any) -> str:
    """``text`` executed as a Go template with ``data`` as the dot."""
    body, _ = _parse(_tokens(text), None)
    out: list[str] = []
    _run(body, data, [{"$": data}], out)
    return "".join(out)


# -- reading -------------------------------------------------------------------------------------
def _tokens(text: str) -> list[tuple[Any, ...]]:
    """("text", s) and ("act", body, line) in order, with the trim markers applied."""
    found: list[tuple[Any, ...]] = []
    pos = 0
    trim_next = False
    for match in _ACTION.finditer(text):
        chunk = text[pos : match.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if match.group(1):
            chunk = chunk.rstrip()
        found.append(("text", chunk))
        found.append(("act", match.group(2).strip(), text.count("\n", 0, match.start()) + 1))
        trim_next = bool(match.group(3))
        pos = match.end()
    found.append(("text", text[pos:].lstrip() if trim_next else text[pos:]))
    return found


def _parse(tokens: list[tuple[Any, ...]], opened: int | None) -> tuple[list[Any], tuple[Any, ...] | None]:
    """Nodes up to the ``end`` or ``else`` of the block opened at line ``opened`` (None: the whole text); returns
    them and that closing action (both consumed from ``tokens``)."""
    nodes: list[Any] = []
    while tokens:
        tok = tokens.pop(0)
        if tok[0] == "text":
            if tok[1]:
                nodes.append(("text", tok[1]))
            continue
        body, line = tok[1], tok[2]
        word = body.split(None, 1)[0] if body else ""
        if body.startswith("/*"):
            continue
        if word in ("end", "else"):
            if opened is None:
                raise TemplateError(f"{{{{ {word} }}}} without an if, range or with to close", line)
            return nodes, tok
        if word in ("if", "with", "range"):
            nodes.append(_block(word, body[len(word) :].strip(), line, tokens))
        elif word in ("define", "template", "block", "break", "continue"):
            raise TemplateError(
                f"{{{{ {word} }}}} is not in the Go template subset nestlab renders; render the file with "
                "containerlab (or gomplate) and deploy the result",
                line,
            )
        else:
            nodes.append(("act", _pipeline(body, line), line))
    if opened is not None:
        raise TemplateError("the block opened here is not closed: add {{ end }}", opened)
    return nodes, None


def _block(word: str, rest: str, line: int, tokens: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    declared: list[str] = []
    if word == "range":
        head = re.match(r"^(\$\w*)\s*(?:,\s*(\$\w*)\s*)?:=\s*(.*)$", rest, re.S)
        if head:
            declared = [v for v in head.group(1, 2) if v]
            rest = head.group(3)
    branches: list[tuple[tuple[Any, ...], list[Any] | None]] = [(_pipeline(rest, line), None)]
    else_body: list[Any] = []
    while True:
        body, closing = _parse(tokens, line)
        assert closing is not None  # a block's parse ends at its end or else, or raises
        branches[-1] = (branches[-1][0], body)
        text = closing[1]
        if text == "end":
            break
        after = text[len("else") :].strip()
        if word == "if" and after.startswith("if "):  # else if: one more branch of the same block
            branches.append((_pipeline(after[3:], closing[2]), None))
            continue
        if after:
            raise TemplateError(f"{{{{ {text} }}}}: only `else` or `else if` may follow here", closing[2])
        else_body, closing = _parse(tokens, line)
        assert closing is not None  # as above
        if closing[1] != "end":
            raise TemplateError("a second {{ else }} in one block", closing[2])
        break
    return (word, branches, else_body, declared, line)


def _pipeline(text: str, line: int) -> tuple[Any, ...]:
    """A pipeline: (declared variable and ":=" or "=", or None; [commands]; line); a command is a list of arguments."""
    words = _lex(text, line)
    assign = None
    if len(words) > 2 and isinstance(words[0], str) and words[0].startswith("$") and words[1] in (":=", "="):
        assign, words = (words[0], words[1]), words[2:]
    return _split(words, assign, text, line)


def _split(words: list[Any], assign: tuple[Any, ...] | None, text: str, line: int) -> tuple[Any, ...]:
    commands: list[list[Any]] = []
    current: list[Any] = []
    for word in words:
        if word == "|":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    if any(not c for c in commands):
        raise TemplateError(f"{{{{ {text} }}}}: an empty command in the pipeline", line)
    return (assign, commands, line)


def _lex(text: str, line: int) -> list[Any]:
    """Arguments of a pipeline; a parenthesised part becomes a nested pipeline."""
    stack: list[list[Any]] = [[]]
    pos = 0
    while pos < len(text.rstrip()):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise TemplateError(f"cannot read `{text[pos:]}` in {{{{ {text} }}}}", line)
        pos = match.end()
        string, raw, punct, word = match.groups()
        if string is not None:
            stack[-1].append(("lit", json.loads(string)))
        elif raw is not None:
            stack[-1].append(("lit", raw[1:-1]))
        elif punct == "(":
            stack.append([])
        elif punct == ")":
            if len(stack) == 1:
                raise TemplateError(f"an unmatched ) in {{{{ {text} }}}}", line)
            inner = stack.pop()
            stack[-1].append(("pipe", _split(inner, None, text, line)))
        elif punct is not None:
            stack[-1].append(punct)
        else:
            stack[-1].append(word)
    if len(stack) != 1:
        raise TemplateError(f"an unclosed ( in {{{{ {text} }}}}", line)
    return stack[0]


# -- running -------------------------------------------------------------------------------------
def _run(nodes: list[Any], dot: Any, scopes: list[dict[str, Any]], out: list[str]) -> None:
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "act":
            value = _eval(node[1], dot, scopes)
            if node[1][0] is None:
                out.append(_show(value))
        elif kind == "if":
            for pipe, body in node[1]:
                if _truth(_eval(pipe, dot, scopes)):
                    _run(body, dot, scopes + [{}], out)
                    break
            else:
                _run(node[2], dot, scopes + [{}], out)
        elif kind == "with":
            value = _eval(node[1][0][0], dot, scopes)
            _run(node[1][0][1] if _truth(value) else node[2], value if _truth(value) else dot, scopes + [{}], out)
        else:
            _range(node, dot, scopes, out)


def _range(node: tuple[Any, ...], dot: Any, scopes: list[dict[str, Any]], out: list[str]) -> None:
    _kind, branches, else_body, declared, line = node
    value = _eval(branches[0][0], dot, scopes)
    if isinstance(value, dict):
        items = [(k, value[k]) for k in sorted(value)]
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [(i, i) for i in range(value)]
    elif value is None:
        items = []
    else:
        raise TemplateError(f"range over {_show(value)!r}, which is not a list, map or number", line)
    if not items:
        _run(else_body, dot, scopes + [{}], out)
    for key, item in items:
        scope = {}
        if len(declared) == 1:
            scope[declared[0]] = item
        elif len(declared) == 2:
            scope[declared[0]], scope[declared[1]] = key, item
        _run(branches[0][1], item, scopes + [scope], out)


def _eval(pipe: tuple[Any, ...], dot: Any, scopes: list[dict[str, Any]]) -> Any:
    assign, commands, line = pipe
    value: Any = None
    for n, command in enumerate(commands):
        value = _command(command, dot, scopes, line, value if n else _NONE)
    if assign:
        name, op = assign
        if op == ":=":
            scopes[-1][name] = value
        else:
            for scope in reversed(scopes):
                if name in scope:
                    scope[name] = value
                    break
            else:
                raise TemplateError(f"{name} = ...: {name} was never declared (use :=)", line)
    return value


_NONE = object()  # no value piped in


def _command(words: list[Any], dot: Any, scopes: list[dict[str, Any]], line: int, piped: Any) -> Any:
    head = words[0]
    if isinstance(head, str) and _is_function(head):
        args = [_arg(w, dot, scopes, line) for w in words[1:]]
        if piped is not _NONE:
            args.append(piped)
        fn = FUNCTIONS.get(head)
        if fn is None:
            raise TemplateError(
                f"function `{head}` is not in the Go template subset nestlab renders; render the file "
                "with containerlab (or gomplate) and deploy the result",
                line,
            )
        try:
            return fn(*args)
        except TemplateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
            raise TemplateError(f"{head}: {exc}", line) from None
    if len(words) > 1 or piped is not _NONE:
        raise TemplateError(f"`{head if isinstance(head, str) else '(...)'}` is not a function, so it takes no arguments", line)
    return _arg(head, dot, scopes, line)


def _is_function(word: str) -> bool:
    return not (word[0] in '.$"`-' or word[0].isdigit() or word in ("true", "false", "nil"))


def _arg(word: Any, dot: Any, scopes: list[dict[str, Any]], line: int) -> Any:
    if isinstance(word, tuple):
        return word[1] if word[0] == "lit" else _eval(word[1], dot, scopes)
    if word in ("true", "false"):
        return word == "true"
    if word == "nil":
        return None
    if _NUMBER.match(word):
        return float(word) if any(c in word for c in ".eE") else int(word)
    if word == ".":
        return dot
    if word.startswith("."):
        return _fields(dot, word[1:].split("."), word, line)
    if word.startswith("$"):
        name, _, rest = word.partition(".")
        for scope in reversed(scopes):
            if name in scope:
                return _fields(scope[name], rest.split(".") if rest else [], word, line)
        raise TemplateError(f"variable {name} is not defined here", line)
    if word in FUNCTIONS:
        return _command([word], dot, scopes, line, _NONE)
    raise TemplateError(f"cannot use `{word}` here", line)


def _fields(value: Any, names: list[str], word: str, line: int) -> Any:
    for name in names:
        if value is None:
            return _MISSING
        if not isinstance(value, dict):
            raise TemplateError(f"{word}: {_show(value)!r} has no field {name}", line)
        value = value.get(name, _MISSING)
    return value


def _truth(value: Any) -> bool:
    return bool(value) if value is not None else False


def _show(value: Any) -> str:
    """A value as Go's fmt prints it (%v)."""
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{_show(k)}:{_show(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def _number(value: Any) -> int | float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {_show(value)}")
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return float(text) if any(c in text for c in ".eE") else int(text)


def _seq(*args: Any) -> list[int]:
    nums = [int(_number(a)) for a in args]
    if len(nums) == 1:
        start, end, step = 1, nums[0], 1
    elif len(nums) in (2, 3):
        start, end = nums[:2]
        step = nums[2] if len(nums) == 3 else (1 if end >= start else -1)
    else:
        raise ValueError(f"expected 1, 2 or 3 arguments, got {len(nums)}")
    if step == 0 or (end - start) * step < 0:
        return []
    return list(range(start, end + (1 if step > 0 else -1), step))


def _printf(fmt: str, *args: Any) -> str:
    values = iter(args)

    def one(match: re.Match[str]) -> str:
        verb = match.group(2)
        if verb == "%":
            return "%"
        value = next(values)
        if verb == "q":
            return json.dumps(_show(value))
        if verb in "dxXobeEfgG":
            return ("%" + match.group(1) + verb) % _number(value)
        return ("%" + match.group(1) + "s") % _show(value)

    return re.sub(r"%([-+ 0#]*\d*(?:\.\d+)?)([a-zA-Z%])", one, fmt)


def _print(*args: Any) -> str:
    out = ""
    for i, a in enumerate(args):  # Go's Sprint: a space between operands when neither is a string
        if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out += " "
        out += _show(a)
    return out


def _compare(a: Any, b: Any, op: Callable[[Any, Any], bool]) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return op(a, b)
    return op(_show(a), _show(b))


def _cidr_host(num: Any, prefix: Any) -> str:
    network = ipaddress.ip_network(str(prefix), strict=False)
    return str(network[int(_number(num))])


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "and": lambda *a: next((x for x in a if not _truth(x)), a[-1]),
    "or": lambda *a: next((x for x in a if _truth(x)), a[-1]),
    "not": lambda a: not _truth(a),
    "len": lambda a: len(a) if a is not None else 0,
    "index": lambda a, *keys: _index(a, keys),
    "print": _print,
    "println": lambda *a: " ".join(_show(x) for x in a) + "\n",
    "printf": _printf,
    "eq": lambda a, *b: any(_compare(a, x, lambda p, q: p == q) for x in b),
    "ne": lambda a, b: _compare(a, b, lambda p, q: p != q),
    "lt": lambda a, b: _compare(a, b, lambda p, q: p < q),
    "le": lambda a, b: _compare(a, b, lambda p, q: p <= q),
    "gt": lambda a, b: _compare(a, b, lambda p, q: p > q),
    "ge": lambda a, b: _compare(a, b, lambda p, q: p >= q),
    "add": lambda a, b: _number(a) + _number(b),
    "subtract": lambda a, b: _number(a) - _number(b),
    "mul": lambda a, b: _number(a) * _number(b),
    "div": lambda a, b: _number(a) / _number(b),
    "idiv": lambda a, b: int(_number(a)) // int(_number(b)),
    "rem": lambda a, b: int(_number(a)) % int(_number(b)),
    "seq": _seq,
    "slice": lambda a, *bounds: a[slice(*(int(_number(x)) for x in bounds))],
    "ToJSON": lambda a: json.dumps(a, separators=(",", ":")),
    "ToJSONPretty": lambda a, prefix, indent: json.dumps(a, indent=indent).replace("\n", "\n" + prefix),
    "strings.Split": lambda sep, s: _show(s).split(sep),
    "strings.ReplaceAll": lambda old, new, s: _show(s).replace(old, new) if old else _show(s),
    "conv.Join": lambda items, sep: sep.join(_show(x) for x in items),
    "conv.ToInt": lambda a: int(_number(a)),
    "net.CIDRHost": _cidr_host,
}


def _index(value: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        value = value.get(key, _MISSING) if isinstance(value, dict) else value[int(_number(key))]
    return value
