"""Tool schemas (§4.4) made safe to check: validated once, never fetched, bounded.

A tool's ``parameters`` is a JSON Schema chosen by whoever sent the request,
and §8.2 has clients check every ``tool.call`` against it. Used as is, such a
schema is an attack surface (docs/conformance.md ruling 15):

* a ``$ref`` to ``http:``/``file:`` makes jsonschema's default registry fetch
  it. Here every reference must be local (``#...``), ``check_schema`` refuses
  any other, and the registry a ``Checker`` uses refuses all retrieval;
* ``pattern`` and ``patternProperties`` run on Python's backtracking ``re``:
  ``^(a+)+$`` against 30 letters and a ``!`` takes minutes. Here they run on
  RE2 (google-re2), which matches in linear time, on strings of at most
  ``MAX_PATTERN_SUBJECT`` characters; a pattern RE2 cannot compile (a
  backreference, a lookaround) is refused when the request arrives;
* ``$ref`` chains can make one check exponential, so every check has a
  budget of ``MAX_STEPS`` keyword evaluations;
* ``minItems: 10**9`` and its kind ask whoever synthesises arguments (the
  demo model) for gigabytes: they are capped at ``MAX_MIN_BOUND``.

``check_schema(schema, path)`` runs when a request is parsed and raises
``InvalidRequest`` naming the JSON path of the fault
(``tools[0].parameters.properties.x.type``). ``compile_checker(schema)``
gives the ``Checker`` the §8.2 validator uses; it fails closed: a schema it
cannot use raises ``InvalidRequest``, and an error inside a check is a
finding, never "valid".

jsonschema and google-re2 are imported lazily, the first time a schema is
checked, so the protocol core loads neither.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec

from .errors import InvalidRequest, TokenwireError

__all__ = [
    "MAX_MIN_BOUND",
    "MAX_PATTERN_LENGTH",
    "MAX_PATTERN_SUBJECT",
    "MAX_STEPS",
    "MAX_UNIQUE_ITEMS",
    "Checker",
    "check_schema",
    "compile_checker",
]

#: ``minItems``, ``minLength``, ``minProperties`` and ``minContains`` above
#: this are refused: a tool argument that must hold more is not a real need,
#: and a synthesiser would have to build it.
MAX_MIN_BOUND: Final = 4096
#: A ``pattern`` (or ``patternProperties`` key) longer than this is refused.
MAX_PATTERN_LENGTH: Final = 1000
#: A string longer than this is not matched against a pattern: it fails the check.
MAX_PATTERN_SUBJECT: Final = 1 << 16
#: ``uniqueItems`` is checked on arrays of at most this many items: jsonschema
#: compares unhashable items pairwise, so 300,000 ``{}`` would take hours.
MAX_UNIQUE_ITEMS: Final = 1000
#: Keyword evaluations allowed for one check of one set of arguments (a
#: plain object schema takes a few dozen; 20,000 cost about half a second).
#: A schema that once needed more is refused for every later call too.
MAX_STEPS: Final = 20_000
#: RE2's memory budget for one compiled pattern (a real one needs kilobytes),
#: and how many compiled patterns are kept: at most 128 MiB, whatever is sent.
_RE2_MAX_MEM: Final = 1 << 20
_RE2_CACHED: Final = 128

#: The drafts a tool schema may name in ``$schema``; without one, 2020-12.
_DRAFTS: Final = {
    "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator",
    "https://json-schema.org/draft/2019-09/schema": "Draft201909Validator",
    "http://json-schema.org/draft-07/schema": "Draft7Validator",
    "http://json-schema.org/draft-06/schema": "Draft6Validator",
    "http://json-schema.org/draft-04/schema": "Draft4Validator",
}
_REF_KEYWORDS: Final = ("$ref", "$dynamicRef", "$recursiveRef")
_MIN_KEYWORDS: Final = ("minItems", "minLength", "minProperties", "minContains")
# Keywords whose value is one subschema, an array of them, or an object of them.
_ONE: Final = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_MANY: Final = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_NAMED: Final = (
    "$defs",
    "definitions",
    "dependencies",
    "dependentSchemas",
    "patternProperties",
    "properties",
)
_KEY: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SHOWN: Final = 64


def _shown(value: object) -> str:
    """``value`` for an error message, cut to 64 characters."""
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _KEY.fullmatch(key):
        return f"{path}.{key}"
    shown = key if len(key) <= _SHOWN else key[:_SHOWN] + "…"
    return f"{path}[{msgspec.json.encode(shown).decode()}]"


# --- RE2 ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _re2() -> Any:
    try:
        import re2
    except ImportError:  # pragma: no cover - a dependency; fail closed without it
        return None
    return re2


@functools.lru_cache(maxsize=_RE2_CACHED)
def _compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2; raises ``ValueError`` with the reason."""
    re2 = _re2()
    if re2 is None:  # pragma: no cover
        raise ValueError("pattern checking needs the google-re2 package")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"longer than {MAX_PATTERN_LENGTH} characters")
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.max_mem = _RE2_MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(
            f"not a pattern tokenwire can match in linear time (RE2 syntax: no "
            f"backreferences or lookarounds): {detail}"
        ) from None


# --- check_schema: the request-time walk ------------------------------------------------


def _walk(node: object, path: str, found: set[str]) -> None:
    """Check one schema node and its subschemas, recursively (depth is bounded by parse)."""
    if isinstance(node, bool):
        return  # true / false are schemas
    if not isinstance(node, dict):
        return  # the metaschema check reports the type
    if "$schema" in node:
        uri = node["$schema"]
        if not isinstance(uri, str) or uri.rstrip("#") not in _DRAFTS:
            raise InvalidRequest(
                f"unsupported $schema {_shown(uri)}: use draft 2020-12, 2019-09, 7, 6 or 4",
                path=_child(path, "$schema"),
            )
    for keyword in _REF_KEYWORDS:
        ref = node.get(keyword)
        if ref is not None and not (isinstance(ref, str) and ref.startswith("#")):
            # Never resolved against the network or the file system (§8 security).
            raise InvalidRequest(
                f"only local references (#...) are allowed, got {_shown(ref)}",
                path=_child(path, keyword),
            )
    for keyword in _MIN_KEYWORDS:
        bound = node.get(keyword)
        if isinstance(bound, int | float) and not isinstance(bound, bool) and bound > MAX_MIN_BOUND:
            raise InvalidRequest(
                f"{keyword} is over tokenwire's limit of {MAX_MIN_BOUND}",
                path=_child(path, keyword),
            )
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            _compiled(pattern)
        except ValueError as exc:
            raise InvalidRequest(f"unusable pattern: {exc}", path=_child(path, "pattern")) from None
    for keyword in ("patternProperties", "unevaluatedProperties"):
        if keyword in node:
            found.add(keyword)
    for keyword in _ONE:
        if keyword in node and isinstance(node[keyword], dict | bool):
            _walk(node[keyword], _child(path, keyword), found)
    for keyword in _MANY:
        value = node.get(keyword)
        if isinstance(value, list):
            for i, sub in enumerate(value):
                _walk(sub, _child(_child(path, keyword), i), found)
    for keyword in _NAMED:
        value = node.get(keyword)
        if not isinstance(value, dict):
            continue
        where = _child(path, keyword)
        for name, sub in value.items():
            if keyword == "patternProperties":
                try:
                    _compiled(name)
                except ValueError as exc:
                    raise InvalidRequest(
                        f"unusable pattern: {exc}", path=_child(where, name)
                    ) from None
            _walk(sub, _child(where, name), found)


def _validator_class(schema: dict[str, Any]) -> Any:
    import jsonschema

    uri = schema.get("$schema")
    name = _DRAFTS[uri.rstrip("#")] if isinstance(uri, str) else "Draft202012Validator"
    return getattr(jsonschema, name)


def check_schema(schema: object, path: str = "$") -> None:
    """Check a tool's ``parameters`` schema; ``path`` is where it sits in the request.

    Raises ``InvalidRequest`` whose ``path`` names the faulty value (e.g.
    ``tools[0].parameters.properties.x.type``) when the schema is not an
    object, is invalid for its draft, names an unsupported ``$schema``, holds
    a non-local reference, a pattern RE2 cannot compile, a ``min*`` bound over
    ``MAX_MIN_BOUND``, or ``unevaluatedProperties`` next to
    ``patternProperties`` (jsonschema would match those with ``re``).
    """
    if not isinstance(schema, dict):
        raise InvalidRequest("must be a JSON Schema object (§4.4)", path=path)
    try:
        key = msgspec.json.encode(schema)
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        # Only from a caller that built the schema by hand: request.parse gives JSON.
        raise InvalidRequest("must be a JSON value of bounded depth", path=path) from None
    try:
        # Small schemas (every real one) are remembered; a huge one is checked
        # each time rather than kept: the cache must not hold gigabytes.
        (_checked_cached if len(key) <= _CACHED_SCHEMA_BYTES else _checked)(key, path)
    except RecursionError:
        raise InvalidRequest("nested too deeply to check", path=path) from None


def _checked(key: bytes, path: str) -> None:
    schema = msgspec.json.decode(key)
    found: set[str] = set()
    _walk(schema, path, found)
    if found == {"patternProperties", "unevaluatedProperties"}:
        raise InvalidRequest(
            "unevaluatedProperties cannot be combined with patternProperties "
            "(jsonschema would evaluate those patterns with a backtracking engine)",
            path=path,
        )
    import jsonschema

    cls = _validator_class(schema)
    meta = cls(cls.META_SCHEMA)  # no format checker: patterns were compiled by RE2 above
    error = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    if error is not None:
        where = path
        for part in error.absolute_path:
            where = _child(where, part if isinstance(part, int) else str(part))
        message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
        raise InvalidRequest(f"not a valid JSON Schema: {message}", path=where)


# Cached on the schema's JSON: a client sends the same tools with every turn.
_checked_cached: Final = functools.lru_cache(maxsize=256)(_checked)
_CACHED_SCHEMA_BYTES: Final = 64 << 10


# --- The checker ------------------------------------------------------------------------


class _OverBudget(TokenwireError):
    """A check used its MAX_STEPS keyword evaluations (internal)."""


#: The steps left to the check under way. The one context variable of the package, kept
#: because nothing else reaches jsonschema's keyword callbacks: they get only
#: ``(validator, value, instance, schema)``, and the validator is cached per schema
#: and copied as it descends, so it cannot carry one check's count.
_BUDGET: contextvars.ContextVar[list[int]] = contextvars.ContextVar("tokenwire_schema_budget")


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get(None)
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                raise _OverBudget
        return keyword(validator, value, instance, schema)

    return run


def _too_long(text: str) -> str:
    return f"a string of {len(text)} characters is too long to match a pattern against"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    if len(instance) > MAX_PATTERN_SUBJECT:
        yield ValidationError(_too_long(instance))
    elif _compiled(pattern).search(instance) is None:
        yield ValidationError(f"{_shown(instance)} does not match {_shown(pattern)}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _compiled(pattern)
        for key, value in instance.items():
            if len(key) > MAX_PATTERN_SUBJECT:
                yield ValidationError(_too_long(key))
            elif compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    # jsonschema's own version matches the patternProperties keys with re.
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    extras = []
    for key in instance:
        if key in properties:
            continue
        if len(key) > MAX_PATTERN_SUBJECT and patterns:
            yield ValidationError(_too_long(key))
            continue
        if any(p.search(key) is not None for p in patterns):
            continue
        extras.append(key)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif not additional and extras:
        shown = ", ".join(_shown(key) for key in sorted(extras)[:5])
        more = f" and {len(extras) - 5} more" if len(extras) > 5 else ""
        yield ValidationError(f"additional properties are not allowed ({shown}{more})")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import _keywords
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array") and len(instance) > MAX_UNIQUE_ITEMS:
        yield ValidationError(
            f"an array of {len(instance)} items is too long to check uniqueItems "
            f"(limit {MAX_UNIQUE_ITEMS})"
        )
        return
    original: Any = _keywords.uniqueItems  # typed as returning None by the stubs
    yield from original(validator, unique, instance, schema)


def _refuse_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


class Checker:
    """Checks tool-call arguments against one tool schema (§8.2); fails closed.

    Built by ``compile_checker``. ``first_error(arguments)`` returns ``None``
    when the arguments are valid, else one sentence naming where they are
    not; a check that cannot be completed (over budget, an unresolvable
    local ``$ref``, anything unexpected) is a finding too. After one check
    over budget, every later one is refused at once.
    """

    def __init__(self, validator: Any) -> None:
        self._validator = validator
        self._over_budget = False

    def first_error(self, arguments: object) -> str | None:
        over = f"could not be checked: the schema needs more than {MAX_STEPS} steps"
        if self._over_budget:
            return over  # it cost a budget once: no hostile schema gets to cost it twice
        token = _BUDGET.set([MAX_STEPS])
        try:
            errors = list(self._validator.iter_errors(arguments))
        except _OverBudget:
            self._over_budget = True
            return over
        except RecursionError:
            return "could not be checked: the schema or the arguments nest too deeply"
        except Exception as exc:  # fail closed: an unusable schema rejects the call
            return f"could not be checked against the schema: {type(exc).__name__}"
        finally:
            _BUDGET.reset(token)
        best = min(errors, key=lambda e: list(map(str, e.path)), default=None)
        if best is None:
            return None
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in best.path)
        message = best.message if len(best.message) <= 200 else best.message[:200] + "…"
        return f"{where.lstrip('.') or '(top)'}: {message}"


@functools.lru_cache(maxsize=8)
def _safe_class(name: str) -> Any:
    """The jsonschema validator class ``name``, with every keyword counted and the
    pattern keywords on RE2."""
    import jsonschema

    base = getattr(jsonschema, name)
    keywords = dict(base.VALIDATORS)
    keywords["pattern"] = _pattern
    keywords["patternProperties"] = _pattern_properties
    keywords["additionalProperties"] = _additional_properties
    keywords["uniqueItems"] = _unique_items
    counted = {key: _counted(function) for key, function in keywords.items()}
    return jsonschema.validators.extend(base, counted)  # type: ignore[no-untyped-call]


def compile_checker(schema: object) -> Checker:
    """A ``Checker`` for ``schema``; raises ``InvalidRequest`` if it is unusable.

    The schema goes through ``check_schema`` first, so a schema that reached
    a ``Checker`` has only local references, and its registry refuses any
    retrieval all the same.
    """
    check_schema(schema)
    assert isinstance(schema, dict)
    import referencing

    cls = _safe_class(_validator_class(schema).__name__)
    registry: Any = referencing.Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
    return Checker(cls(schema, registry=registry))
