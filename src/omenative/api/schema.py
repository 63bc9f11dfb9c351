"""A small schema layer over attrs: one declaration gives the Python model, its JSON form and its OpenAPI schema.

Every field is declared with `field("jsonName", "description", ...)`. From that:
- `from_dict` / `to_dict` convert between the JSON form and the models without losing anything: keys the model does
  not declare are kept in `extra` and written back, so objects written for upstream OME round-trip intact;
- `openapi_schema` produces the structural schema of the CRD (descriptions for `kubectl explain`, enums, defaults,
  bounds, list-map keys for server-side apply, int-or-string, preserved unknown fields).

Fields absent from the input stay None, so `to_dict(from_dict(x)) == x`; defaulting is a separate, explicit step
(`omenative.api.defaults`), never a side effect of parsing.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs

JSON = Any  # an opaque JSON value: a pod template, a container, an affinity

META_KEY = "omenative.api"
T = TypeVar("T", bound="Model")


@attrs.frozen
class FieldMeta:
    name: str
    doc: str
    enum: tuple[str, ...] | None = None
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    max_length: int | None = None
    list_map_keys: tuple[str, ...] | None = None
    list_type: str | None = None  # "atomic" | "set" | "map"
    map_type: str | None = None  # "granular" | "atomic"
    int_or_string: bool = False
    preserve_unknown: bool = False
    required: bool = False
    format: str | None = None
    nullable: bool = False
    max_items: int | None = None


def field(
    name: str,
    doc: str,
    *,
    enum: tuple[str, ...] | None = None,
    default: Any = None,
    minimum: int | None = None,
    maximum: int | None = None,
    pattern: str | None = None,
    max_length: int | None = None,
    list_map_keys: tuple[str, ...] | None = None,
    list_type: str | None = None,
    map_type: str | None = None,
    int_or_string: bool = False,
    preserve_unknown: bool = False,
    required: bool = False,
    format: str | None = None,
    nullable: bool = False,
    max_items: int | None = None,
) -> Any:
    """Declares a model field. `default` is the schema default the API server applies, not a parse default."""
    meta = FieldMeta(name, doc, enum, default, minimum, maximum, pattern, max_length, list_map_keys, list_type,
                     map_type, int_or_string, preserve_unknown, required, format, nullable, max_items)
    return attrs.field(default=None, metadata={META_KEY: meta}, kw_only=True)


@attrs.define(kw_only=True)
class Model:
    """Base of every API model. `extra` keeps the keys the model does not declare."""

    extra: dict[str, Any] = attrs.field(factory=dict, repr=False)

    # Class-level schema options, overridden by subclasses.
    __schema_preserve_unknown__: typing.ClassVar[bool] = False
    __schema_extra_properties__: typing.ClassVar[dict[str, Any]] = {}

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any] | None) -> T:
        return from_dict(cls, data or {})

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


_FIELDS: dict[type, list[tuple[attrs.Attribute[Any], FieldMeta, Any]]] = {}


def model_fields(cls: type[Model]) -> list[tuple[attrs.Attribute[Any], FieldMeta, Any]]:
    """(attribute, metadata, resolved type) of every declared field, in declaration order (cached per class)."""
    cached = _FIELDS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    out = []
    for attribute in attrs.fields(cls):
        meta = attribute.metadata.get(META_KEY)
        if meta is not None:
            out.append((attribute, meta, hints[attribute.name]))
    _FIELDS[cls] = out
    return out


def _strip_optional(tp: Any) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Model)


def _convert_in(tp: Any, value: Any) -> Any:
    convert = _converter(tp)
    return value if convert is None or value is None else convert(value)


@functools.cache
def _converter(tp: Any) -> Callable[[Any], Any] | None:
    """How a JSON value becomes a field of type `tp` (None: as it is), worked out once per type: inspecting the
    type hints on every value made decoding a large status slow."""
    tp = _strip_optional(tp)
    if _is_model(tp):
        return lambda v: from_dict(tp, v) if isinstance(v, Mapping) else v
    origin = get_origin(tp)
    if origin is list:
        (item,) = get_args(tp)
        maybe = _converter(item)
        if maybe is None:
            return lambda v: list(v) if isinstance(v, list) else v
        each: Callable[[Any], Any] = maybe
        return lambda v: [None if x is None else each(x) for x in v] if isinstance(v, list) else v
    if origin is dict:
        _, item = get_args(tp)
        maybe_value = _converter(item)
        if maybe_value is None:
            return lambda v: dict(v) if isinstance(v, Mapping) else v
        each_value: Callable[[Any], Any] = maybe_value
        return lambda v: {k: None if x is None else each_value(x) for k, x in v.items()} if isinstance(v, Mapping) \
            else v
    return None


_Plan = tuple[tuple[tuple[str, str, Callable[[Any], Any] | None], ...], frozenset[str]]
_PLANS: dict[type, _Plan] = {}


def _decoding_plan(cls: type[Model]) -> _Plan:
    """(attribute, JSON key, converter) of every field, and the JSON keys the model knows (cached per class)."""
    plan = _PLANS.get(cls)
    if plan is None:
        fields = tuple((attribute.name, meta.name, _converter(tp)) for attribute, meta, tp in model_fields(cls))
        plan = _PLANS[cls] = (fields, frozenset(key for _, key, _ in fields))
    return plan


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    kwargs: dict[str, Any] = {}
    fields, known = _decoding_plan(cls)
    for name, key, convert in fields:
        if key in data:
            value = data[key]
            kwargs[name] = value if convert is None or value is None else convert(value)
    extra = {k: v for k, v in data.items() if k not in known} if len(data) > len(kwargs) else {}
    return cls(extra=extra, **kwargs)


def _convert_out(value: Any) -> Any:
    if isinstance(value, Model):
        return to_dict(value)
    if isinstance(value, list):
        return [_convert_out(v) for v in value]
    if isinstance(value, dict):
        return {k: _convert_out(v) for k, v in value.items()}
    return value


def to_dict(obj: Model) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attribute, meta, _ in model_fields(type(obj)):
        value = getattr(obj, attribute.name)
        if value is not None:
            out[meta.name] = _convert_out(value)
    for key, value in obj.extra.items():
        out.setdefault(key, value)
    return out


# -- OpenAPI


def _type_schema(tp: Any, meta: FieldMeta | None, seen: tuple[type, ...]) -> dict[str, Any]:
    tp = _strip_optional(tp)
    if meta is not None and meta.int_or_string:
        return {"x-kubernetes-int-or-string": True}
    if _is_model(tp):
        return openapi_schema(tp, seen)
    origin = get_origin(tp)
    if origin is list:
        (item,) = get_args(tp)
        schema: dict[str, Any] = {"type": "array", "items": _type_schema(item, None, seen)}
        return schema
    if origin is dict:
        _, item = get_args(tp)
        return {"type": "object", "additionalProperties": _type_schema(item, None, seen)}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    # JSON / Any: an opaque value the API server must keep as it is.
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


# FieldMeta attributes copied as they are into a field's OpenAPI schema.
_VALUE_KEYWORDS = (("default", "default"), ("minimum", "minimum"), ("maximum", "maximum"), ("pattern", "pattern"),
                   ("max_length", "maxLength"), ("format", "format"), ("max_items", "maxItems"))


def field_schema(meta: FieldMeta, tp: Any, seen: tuple[type, ...] = ()) -> dict[str, Any]:
    schema = _type_schema(tp, meta, seen)
    schema = {**schema, "description": meta.doc}
    if meta.enum is not None:
        schema["enum"] = list(meta.enum)
    for attribute, keyword in _VALUE_KEYWORDS:
        if (value := getattr(meta, attribute)) is not None:
            schema[keyword] = value
    if meta.list_map_keys is not None:
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = list(meta.list_map_keys)
    elif meta.list_type is not None:
        schema["x-kubernetes-list-type"] = meta.list_type
    if meta.map_type is not None:
        schema["x-kubernetes-map-type"] = meta.map_type
    if meta.preserve_unknown and "x-kubernetes-preserve-unknown-fields" not in schema:
        schema["x-kubernetes-preserve-unknown-fields"] = True
        schema.setdefault("type", "object")
    if meta.nullable:
        schema["nullable"] = True
    return schema


def openapi_schema(cls: type[Model], seen: tuple[type, ...] = ()) -> dict[str, Any]:
    if cls in seen:  # recursive types are not structural; keep the inner one opaque
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    seen = (*seen, cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for _, meta, tp in model_fields(cls):
        properties[meta.name] = field_schema(meta, tp, seen)
        if meta.required:
            required.append(meta.name)
    properties.update(cls.__schema_extra_properties__)
    schema: dict[str, Any] = {"type": "object"}
    doc = (cls.__doc__ or "").strip()
    if doc:
        schema["description"] = " ".join(doc.split())
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = required
    if cls.__schema_preserve_unknown__:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema
