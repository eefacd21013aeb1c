"""Papermill parameters for Go notebooks (the gonb kernel of VRAM Lab).

Papermill writes the parameters it is given (-p, -y, -f) as a new cell of the
notebook's language after the cell tagged "parameters"; it knows Python, R,
Julia, Scala, … but not Go. Importing this module registers a Go translator:
each parameter becomes a package-level declaration, which gonb keeps and which
replaces the template's own declaration of the same name:

    var plan = "plans/x.json"
    var plans = []string{"a.json", "b.json"}

Strings become Go string literals (quotes, backslashes and control characters
escaped, and the byte order mark, which Go source may not contain), so a
parameter value is always data, never code. A name must be a Go identifier
that is neither a keyword nor predeclared (`-p true false` would declare
`var true = false`); a value that would not compile (a lone surrogate, an
integer past int64, NaN) is refused with a message.
"""
import json
import math
import re

from papermill.engines import NBClientEngine
from papermill.exceptions import PapermillException
from papermill.models import Parameter
from papermill.translators import Translator, papermill_translators

__all__ = ["GoTranslator", "Engine"]

# Go identifiers: a letter or underscore, then letters, digits, underscores
# (ASCII, which is what a template's parameters cell declares).
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {
    "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for", "func", "go",
    "goto", "if", "import", "interface", "map", "package", "range", "return", "select", "struct", "switch", "type", "var",
}
# The universe block of the Go spec ("Predeclared identifiers"), and the
# blank identifier.
_PREDECLARED = {
    "any", "bool", "byte", "comparable", "complex64", "complex128", "error", "float32", "float64", "int", "int8",
    "int16", "int32", "int64", "rune", "string", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr",
    "true", "false", "iota", "nil",
    "append", "cap", "clear", "close", "complex", "copy", "delete", "imag", "len", "make", "max", "min", "new", "panic",
    "print", "println", "real", "recover", "_",
}


class GoTranslator(Translator):
    """Translates papermill parameters (JSON/YAML values) to Go declarations."""

    @classmethod
    def translate_escaped_str(cls, str_val):
        # JSON's string escapes (\" \\ \n \t \uXXXX …) are all Go escapes, and
        # JSON leaves no raw newline or quote in the literal. Go source may
        # not hold a byte order mark, and no escape makes a surrogate half.
        s = str(str_val)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            raise PapermillException(f"parameter value {s!r} holds a lone surrogate (not Unicode text), which has no Go literal")
        return json.dumps(s, ensure_ascii=False).replace("\ufeff", "\\ufeff")

    @classmethod
    def translate_str(cls, val):
        return cls.translate_escaped_str(val)

    @classmethod
    def translate_none(cls, val):
        raise PapermillException("a parameter is null, which has no Go value: give a string, number, bool, list or map")

    @classmethod
    def translate_int(cls, val):
        if not -(2**63) <= int(val) < 2**63:
            raise PapermillException(f"parameter value {val} does not fit in a Go int (64 bits)")
        return str(int(val))

    @classmethod
    def translate_float(cls, val):
        if math.isnan(val) or math.isinf(val):
            raise PapermillException(f"parameter value {val} has no Go literal")
        return repr(float(val))

    @classmethod
    def translate_bool(cls, val):
        return "true" if val else "false"

    @classmethod
    def translate_list(cls, val):
        kind = _element_type(val)
        return f"[]{kind}{{{', '.join(cls.translate(v) for v in val)}}}"

    @classmethod
    def translate_dict(cls, val):
        kind = _element_type(list(val.values()))
        items = ", ".join(f"{cls.translate_escaped_str(k)}: {cls.translate(v)}" for k, v in val.items())
        return f"map[string]{kind}{{{items}}}"

    @classmethod
    def comment(cls, cmt_str):
        return f"// {cmt_str}".strip()

    @classmethod
    def assign(cls, name, str_val):
        if not _IDENT.fullmatch(name) or name in _KEYWORDS:
            raise PapermillException(f"parameter name {name!r} is not a Go identifier")
        if name in _PREDECLARED:
            raise PapermillException(f"parameter name {name!r} is predeclared in Go; choose another name")
        return f"var {name} = {str_val}"

    @classmethod
    def inspect(cls, parameters_cell):
        """The parameters a template declares: `var name = value` lines."""
        params = []
        for line in parameters_cell.source.splitlines():
            m = re.match(r"^\s*var\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:([^=\s]+)\s*)?=\s*(.+?)\s*(?://\s*(.*))?$", line)
            if m:
                name, typ, default, help_ = m.groups()
                params.append(Parameter(name=name, inferred_type_name=typ or "None", default=default, help=help_ or ""))
        return params


def _element_type(values):
    """The Go element type of a list's (or map's) values."""
    if values and all(isinstance(v, str) for v in values):
        return "string"
    if values and all(isinstance(v, bool) for v in values):
        return "bool"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int"
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "float64"
    return "any"


# Papermill's own engine under this package's entry point (see
# pyproject.toml): loading it is what registers the translator.
Engine = NBClientEngine

papermill_translators.register("go", GoTranslator)
