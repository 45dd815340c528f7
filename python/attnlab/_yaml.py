"""A reader for the YAML that attnlab writes: a run's resolved config (/config) and a sweep's
manifest (sweep.yaml).

The package depends on h5py, numpy and pandas only, so it cannot lean on PyYAML. This reads the
YAML subset yaml-cpp's emitter produces and people write in experiment files: block mappings and
sequences (also "- key: value" items), flow sequences and mappings, plain, single- and
double-quoted scalars, "|" and ">" block scalars, comments, anchors and aliases. Scalars become
None, bool, int, float or str by YAML 1.2's core schema, as PyYAML and yaml-cpp read them.
tests/test_yaml.py checks it against PyYAML on every shipped experiment's resolved config.
"""
from __future__ import annotations

import math
import re

__all__ = ["YamlError", "load"]


class YamlError(ValueError):
    """Text this reader does not understand; the message names the line."""


_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)$")
_HEX = re.compile(r"0x[0-9a-fA-F]+$")
_OCT = re.compile(r"0o[0-7]+$")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def scalar(text: str):
    """A plain scalar's value (YAML 1.2 core schema)."""
    t = text.strip()
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if _INT.match(t):
        return int(t)
    if _HEX.match(t):
        return int(t, 16)
    if _OCT.match(t):
        return int(t[2:], 8)
    if _FLOAT.match(t):
        return float(t)
    if t in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"):
        return math.inf
    if t in ("-.inf", "-.Inf", "-.INF"):
        return -math.inf
    if t in (".nan", ".NaN", ".NAN"):
        return math.nan
    return t


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "/": "/", " ": " ",
            "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "v": "\v", "N": "\x85", "_": "\xa0",
            "L": "\u2028", "P": "\u2029"}


class _Parser:
    def __init__(self, text: str, where: str):
        self.where = where
        self.lines = text.replace("\r\n", "\n").split("\n")
        self.anchors: dict[str, object] = {}

    def error(self, line: int, what: str) -> YamlError:
        return YamlError(f"{self.where}:{line + 1}: {what}")

    # -- lines -----------------------------------------------------------------------------
    @staticmethod
    def strip_comment(s: str) -> str:
        """The line without a trailing comment (a '#' after a space, outside quotes)."""
        quote = None
        i = 0
        while i < len(s):
            c = s[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    if quote == "'" and i + 1 < len(s) and s[i + 1] == "'":
                        i += 2
                        continue
                    quote = None
            elif c in "\"'" and (i == 0 or s[i - 1] in " \t[{,:-"):
                quote = c
            elif c == "#" and (i == 0 or s[i - 1] in " \t"):
                return s[:i].rstrip()
            i += 1
        return s.rstrip()

    def next_content(self, i: int) -> int:
        """The index of the next line at or after i with content (skipping blanks, comments, ---)."""
        while i < len(self.lines):
            s = self.strip_comment(self.lines[i])
            if s.strip() and s.strip() not in ("---", "..."):
                return i
            i += 1
        return i

    def next_entry(self, i: int):
        """(index, text without comment, indent) of the next line with content; (end, None, -1)."""
        i = self.next_content(i)
        if i >= len(self.lines):
            return i, None, -1
        line = self.strip_comment(self.lines[i])
        return i, line, self.indent(line)

    @staticmethod
    def indent(s: str) -> int:
        return len(s) - len(s.lstrip(" "))

    # -- documents -------------------------------------------------------------------------
    def document(self):
        i = self.next_content(0)
        if i >= len(self.lines):
            return None
        value, i = self.node(i, self.indent(self.lines[i]))
        i = self.next_content(i)
        if i < len(self.lines):
            raise self.error(i, "unexpected text after the document")
        return value

    def node(self, i: int, ind: int):
        """Parses the block node whose first line is i (indented by ind); returns (value, next)."""
        s = self.strip_comment(self.lines[i])[ind:]
        if s.startswith("- ") or s == "-":
            return self.block_sequence(i, ind)
        if self.key_split(s, i) is not None:
            return self.block_mapping(i, ind)
        # A scalar or flow collection spanning this line (and continuation lines).
        text, j = self.continued(self.strip_comment(self.lines[i]).strip(), i, ind)
        return self.inline(text, i), j

    def key_split(self, s: str, line: int):
        """(key, rest) when s is "key: rest" (or "key:"), else None."""
        if not s or s[0] in "[{":
            return None
        if s[0] in "\"'":
            end = self.quoted_end(s, 0, line)
            rest = s[end:].lstrip()
            if rest.startswith(":") and (len(rest) == 1 or rest[1] in " \t"):
                return self.quoted(s[:end], line), rest[1:].strip()
            return None
        m = re.match(r"([^#]*?):(\s|$)", s)
        if not m:
            return None
        return m.group(1).strip(), s[m.end():].strip()

    def block_mapping(self, i: int, ind: int):
        out: dict = {}
        while True:
            i, line, cur = self.next_entry(i)
            if line is None:
                return out, i
            if cur < ind:
                return out, i
            if cur > ind:
                raise self.error(i, "bad indentation of a mapping entry")
            split = self.key_split(line[ind:], i)
            if split is None:
                if line[ind:].startswith("- "):
                    return out, i
                raise self.error(i, f"expected 'key: value', found {line[ind:]!r}")
            key, rest = split
            key = scalar(key) if isinstance(key, str) and not line[ind:].lstrip().startswith(("'", '"')) else key
            if key == "<<":
                value, i = self.value_after(rest, i, ind)
                for m in value if isinstance(value, list) else [value]:
                    for k, v in m.items():
                        out.setdefault(k, v)
                continue
            value, i = self.value_after(rest, i, ind)
            out[key] = value

    def value_after(self, rest: str, i: int, ind: int):
        """The value of "key: rest" on line i, in a mapping at indent ind; returns (value, next)."""
        anchor = None
        if rest.startswith("&"):
            name, _, rest = rest.partition(" ")
            anchor, rest = name[1:], rest.strip()
        if rest and rest[0] in "|>":
            value, j = self.block_scalar(rest, i, ind)
        elif rest:
            text, j = self.continued(rest, i, ind)
            value = self.inline(text, i)
        else:
            j = self.next_content(i + 1)
            nested = j < len(self.lines) and (
                self.indent(self.lines[j]) > ind or
                (self.indent(self.lines[j]) == ind and self.strip_comment(self.lines[j])[ind:].startswith("- ")))
            if nested:
                value, j = self.node(j, self.indent(self.lines[j]))
            else:
                value = None
        if anchor:
            self.anchors[anchor] = value
        return value, j

    def continued(self, rest: str, i: int, ind: int) -> tuple[str, int]:
        """rest plus the more-indented lines that continue it (a plain scalar folded over lines, or a
        flow collection), and the line after them."""
        parts = [rest]
        j = i + 1
        while True:
            k = self.next_content(j)
            if k >= len(self.lines) or self.indent(self.lines[k]) <= ind:
                return " ".join(parts), k
            more = self.strip_comment(self.lines[k]).strip()
            if rest[:1] not in ("[", "{", '"', "'") and self.key_split(more, k) is not None:
                raise self.error(k, "bad indentation of a mapping entry (a plain value cannot hold 'key: value')")
            parts.append(more)
            j = k + 1

    def block_sequence(self, i: int, ind: int):
        out: list = []
        while True:
            i, line, cur = self.next_entry(i)
            if line is None:
                return out, i
            if cur != ind or not (line[ind:].startswith("- ") or line[ind:] == "-"):
                if cur > ind:
                    raise self.error(i, "bad indentation of a sequence item")
                return out, i
            rest = line[ind + 1:].lstrip()
            if not rest:
                j = self.next_content(i + 1)
                if j < len(self.lines) and self.indent(self.lines[j]) > ind:
                    value, i = self.node(j, self.indent(self.lines[j]))
                else:
                    value, i = None, i + 1
            elif rest.startswith("- ") or rest == "-" or self.key_split(rest, i) is not None:
                # "- key: v" or "- - x": a block collection that starts on this line, at the
                # column after the dash.
                item_ind = len(line) - len(rest)
                self.lines[i] = " " * item_ind + rest
                value, i = self.node(i, item_ind)
            elif rest[0] in "|>":
                value, i = self.block_scalar(rest, i, ind)
            else:
                text, i = self.continued(rest, i, ind)
                value = self.inline(text, i)
            out.append(value)

    def block_scalar(self, header: str, i: int, ind: int):
        style, chomp = header[0], ""
        for c in header[1:].strip():
            if c in "+-":
                chomp = c
        body: list[str] = []
        j = i + 1
        block_ind = None
        while j < len(self.lines):
            raw = self.lines[j]
            if raw.strip():
                cur = self.indent(raw)
                if cur <= ind:
                    break
                if block_ind is None:
                    block_ind = cur
                body.append(raw[block_ind:])
            else:
                body.append("")
            j += 1
        while body and body[-1] == "" and chomp != "+":
            body.pop()
        if style == "|":
            text = "\n".join(body)
        else:
            text = ""
            for k, b in enumerate(body):
                if k == 0:
                    text = b
                elif b == "" or body[k - 1] == "":
                    text += "\n" if b == "" else b
                else:
                    text += " " + b
        if chomp != "-" and body:
            text += "\n"
        return text, j

    # -- inline values ---------------------------------------------------------------------
    def quoted_end(self, s: str, k: int, line: int) -> int:
        q = s[k]
        k += 1
        while k < len(s):
            if q == '"' and s[k] == "\\":
                k += 2
                continue
            if s[k] == q:
                if q == "'" and k + 1 < len(s) and s[k + 1] == "'":
                    k += 2
                    continue
                return k + 1
            k += 1
        raise self.error(line, "a quoted string does not end")

    def quoted(self, s: str, line: int) -> str:
        if s[0] == "'":
            return s[1:-1].replace("''", "'")
        out, k, body = [], 0, s[1:-1]
        while k < len(body):
            c = body[k]
            if c == "\\" and k + 1 < len(body):
                e = body[k + 1]
                if e == "x":
                    out.append(chr(int(body[k + 2:k + 4], 16)))
                    k += 4
                    continue
                if e == "u":
                    out.append(chr(int(body[k + 2:k + 6], 16)))
                    k += 6
                    continue
                if e == "U":
                    out.append(chr(int(body[k + 2:k + 10], 16)))
                    k += 10
                    continue
                if e not in _ESCAPES:
                    raise self.error(line, f"unknown escape \\{e}")
                out.append(_ESCAPES[e])
                k += 2
                continue
            out.append(c)
            k += 1
        return "".join(out)

    def inline(self, s: str, line: int):
        s = s.strip()
        if s.startswith("*"):
            name = s[1:].strip()
            if name not in self.anchors:
                raise self.error(line, f"unknown alias *{name}")
            return self.anchors[name]
        if s.startswith("&"):
            name, _, rest = s.partition(" ")
            value = self.inline(rest, line)
            self.anchors[name[1:]] = value
            return value
        if s.startswith("!!str "):
            return s[6:].strip().strip("\"'")
        value, k = self.flow(s, 0, line)
        if s[k:].strip():
            if s[0] in "[{\"'":
                raise self.error(line, f"unexpected text after a value: {s[k:]!r}")
            return scalar(s)
        return value

    def flow(self, s: str, k: int, line: int, in_flow: bool = False):
        while k < len(s) and s[k] == " ":
            k += 1
        if k >= len(s):
            return None, k
        c = s[k]
        if c in "[{":
            closing, what = ("]", "sequence") if c == "[" else ("}", "mapping")
            items, k = [], k + 1
            while True:
                while k < len(s) and s[k] in " ,":
                    k += 1
                if k >= len(s):
                    raise self.error(line, f"a flow {what} does not end")
                if s[k] == closing:
                    return (items if c == "[" else dict(items)), k + 1
                v, k = self.flow(s, k, line, True)
                if c == "{":
                    while k < len(s) and s[k] == " ":
                        k += 1
                    value = None
                    if k < len(s) and s[k] == ":":
                        value, k = self.flow(s, k + 1, line, True)
                    v = (v, value)
                items.append(v)
        if c in "\"'":
            end = self.quoted_end(s, k, line)
            return self.quoted(s[k:end], line), end
        if c == "*":
            m = re.match(r"\*([^\s,\]\}]+)", s[k:])
            name = m.group(1)
            if name not in self.anchors:
                raise self.error(line, f"unknown alias *{name}")
            return self.anchors[name], k + m.end()
        # A plain scalar: up to ", " / "]" / "}" / ": " inside flow collections, the end otherwise.
        j = k
        while j < len(s):
            if in_flow and (s[j] in ",]}" or (s[j] == ":" and (j + 1 == len(s) or s[j + 1] in " ,]}"))):
                break
            j += 1
        return scalar(s[k:j]), j


def load(text: str, where: str = "<yaml>"):
    """The value of one YAML document; YamlError naming where:line for what it cannot read."""
    return _Parser(text, where).document()
