"""A cluster config's text (protobuf text format, proto/cluster.proto) read
into plain Python for the package's commands (psgd ledger-check's bounds):
standard library only, no validation (configs/cluster_tasks, psgd-ps and
the workers validate).

    parse(text) -> {"training": [{"batch_size": [16], ...}], "ps": [...]}

Each field maps to a list of its values (a repeated field has several): a
message is a dict, a string a str, a number an int or float, an enum or
bool its word as written. ValueError names the line it cannot read.
"""
import re

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<punct>[{}<>:;,\[\]])
  | (?P<word>[A-Za-z0-9_.+\-]+)
""", re.X)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def _tokens(text):
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"line {line}: cannot read {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        if kind != "space":
            yield kind, m.group(), line
        line += m.group().count("\n")
        pos = m.end()


def _value(kind, tok, line):
    if kind == "string":
        body = tok[1:-1]
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)
    if kind != "word":
        raise ValueError(f"line {line}: a value was expected, not {tok!r}")
    for conv in (int, float):
        try:
            return conv(tok)
        except ValueError:
            pass
    return tok


def parse(text):
    """The message of `text`: field name -> list of values."""
    toks = list(_tokens(text))
    pos = 0

    def message(close):
        nonlocal pos
        out = {}
        while True:
            if pos == len(toks):
                if close is None:
                    return out
                raise ValueError(f"the text ends inside a message ('{close}' missing)")
            kind, tok, line = toks[pos]
            if close is not None and tok == close:
                pos += 1
                return out
            if tok in (";", ","):
                pos += 1
                continue
            if kind != "word":
                raise ValueError(f"line {line}: a field name was expected, not {tok!r}")
            name = tok
            pos += 1
            if pos < len(toks) and toks[pos][1] == ":":
                pos += 1
            if pos == len(toks):
                raise ValueError(f"line {line}: field '{name}' has no value")
            kind, tok, line = toks[pos]
            if tok in ("{", "<"):
                pos += 1
                out.setdefault(name, []).append(message("}" if tok == "{" else ">"))
            elif tok == "[":
                pos += 1
                while toks[pos][1] != "]":
                    if toks[pos][1] != ",":
                        out.setdefault(name, []).append(_value(*toks[pos]))
                    pos += 1
                pos += 1
            else:
                # Adjacent strings concatenate.
                value = _value(kind, tok, line)
                pos += 1
                while (isinstance(value, str) and kind == "string" and pos < len(toks)
                       and toks[pos][0] == "string"):
                    value += _value(*toks[pos])
                    pos += 1
                out.setdefault(name, []).append(value)

    return message(None)


def get(msg, path, default=None):
    """The last value at a dotted path ("training.batch_size"), or default."""
    for i, name in enumerate(path.split(".")):
        values = msg.get(name) if isinstance(msg, dict) else None
        if not values:
            return default
        msg = values[-1]
    return msg
