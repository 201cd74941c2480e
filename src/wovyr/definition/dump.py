"""A definition's document as YAML text, for people to read (the UI's definitions page).

The registry stores each definition's canonical JSON; this turns it back into block YAML
with the usual keys first (apiVersion, kind, metadata, inputs, activities). Text that is not
JSON is returned unchanged."""

from __future__ import annotations

import io
import json

from ruamel.yaml import YAML

__all__ = ["as_yaml"]

_FIRST = ("apiVersion", "kind", "metadata", "inputs", "activities")


def as_yaml(source: str) -> str:
    try:
        data = json.loads(source)
    except ValueError:
        return source
    if isinstance(data, dict):
        data = {
            **{k: data[k] for k in _FIRST if k in data},
            **{k: v for k, v in data.items() if k not in _FIRST},
        }
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
