"""py-words: the faculty's logic, free of WIT bindings.

`app.py` wires these functions to the component's `guest` export; keeping them here lets
them run (and be checked) under a plain CPython too. Failures are raised as `Failure`
(a kind, a stable `code` and a message for people) and turned into the WIT `failure` by
`app.py`.
"""

import json
import os
import re
from collections import Counter

MEMORY = "/data/memory.json"

# The guest's own checks (Python `re`, matched whole). The host checks the same constraints
# first, from the `input` schemas below (JSON Schema: `pattern` is an ECMA regex matched
# anywhere, so it is anchored; lengths count characters).
KEY_PATTERN = "[a-z0-9-]{1,32}"
TEXT_MAX = 10000
NOTE_MAX = 2000

KEY_SCHEMA = {"type": "string", "pattern": f"^{KEY_PATTERN}$"}


def _text_schema(max_length: int) -> dict:
    return {"type": "string", "minLength": 1, "maxLength": max_length}


def _input(properties: dict) -> dict:
    """The JSON Schema of a command's input: an object of exactly these, all required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


MANIFEST = {
    "schemaVersion": 1,
    "kind": "faculty",
    "id": "py-words",
    "name": "Words (Python)",
    "description": "Counts words and remembers short texts in the faculty's own data directory. "
    "Example faculty written in Python (componentize-py).",
    "commands": [
        {
            "id": "count",
            "description": "Count the words of a text and name the five most frequent.",
            "exec": ["self"],
            "effect": "read",
            "input": _input({"text": _text_schema(TEXT_MAX)}),
        },
        {
            "id": "remember",
            "description": "Remember a text under a key.",
            "exec": ["self"],
            "effect": "write",
            "input": _input({"key": KEY_SCHEMA, "text": _text_schema(NOTE_MAX)}),
        },
        {
            "id": "recall",
            "description": "Give back the text remembered under a key.",
            "exec": ["self"],
            "effect": "read",
            "input": _input({"key": KEY_SCHEMA}),
        },
    ],
    "reports": [{"id": "summary", "name": "Remembered texts", "exec": ["self"], "shape": "status"}],
}

WORD = re.compile(r"\w+(?:['’]\w+)*")

# Failure kinds, spelled as in the WIT `failure-kind` enum; `app.py` maps them to the
# bindings' `FailureKind`.
INVALID_INPUT = "invalid-input"
NOT_FOUND = "not-found"
UNAVAILABLE = "unavailable"
FAILED = "failed"
INTERNAL = "internal"


class Failure(Exception):
    """A typed failure: `kind` decides the caller's status, `code` is stable snake_case,
    `message` is for people."""

    def __init__(self, kind: str, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.kind = kind
        self.code = code
        self.message = message


def manifest_json() -> str:
    return json.dumps(MANIFEST, ensure_ascii=False, separators=(",", ":"))


def parse_input(text: str) -> dict:
    """The command's input document: a JSON object (the host has checked it already)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(INVALID_INPUT, "invalid_args", f"the input is not JSON: {e}") from e
    if not isinstance(value, dict):
        raise Failure(INVALID_INPUT, "invalid_args", "the input must be a JSON object")
    return value


def require_key(input: dict) -> str:
    key = input.get("key")
    if key is None:
        raise Failure(INVALID_INPUT, "invalid_args", "missing field `key`")
    if not isinstance(key, str) or not re.fullmatch(KEY_PATTERN, key):
        raise Failure(INVALID_INPUT, "invalid_args", f"`key` must match {KEY_PATTERN}")
    return key


def require_text(input: dict, max_length: int) -> str:
    text = input.get("text")
    if text is None:
        raise Failure(INVALID_INPUT, "invalid_args", "missing field `text`")
    if not isinstance(text, str) or not 1 <= len(text) <= max_length:
        raise Failure(INVALID_INPUT, "invalid_args", f"`text` must be 1 to {max_length} characters")
    return text


def count(input: dict) -> dict:
    text = require_text(input, TEXT_MAX)
    words = [w.lower() for w in WORD.findall(text)]
    counts = Counter(words)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {"words": len(words), "top": [[w, n] for w, n in top]}


def load(path: str = MEMORY) -> dict:
    """The remembered texts. A damaged file is the faculty's own failure (`failed`), not
    the caller's, whatever `invalid_json` suggests; a file it cannot reach is `unavailable`."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Failure(FAILED, "invalid_json", f"{path}: {e}") from e
    except OSError as e:
        raise Failure(UNAVAILABLE, "io_error", f"{path}: {e}") from e
    if not isinstance(data, dict):
        raise Failure(FAILED, "invalid_json", f"{path}: expected an object of entries")
    return data


def write_atomic(path: str, text: str) -> None:
    """Writes through a temp file in the same folder and a rename: never half a file."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise Failure(UNAVAILABLE, "io_error", f"{path}: {e}") from e


def remember(input: dict, now_ms: int, path: str = MEMORY) -> dict:
    key = require_key(input)
    text = require_text(input, NOTE_MAX)
    memory = load(path)
    memory[key] = {"text": text, "at": now_ms}
    write_atomic(path, json.dumps(memory, ensure_ascii=False, sort_keys=True))
    return {"stored": key, "count": len(memory)}


def recall(input: dict, path: str = MEMORY) -> dict:
    key = require_key(input)
    entry = load(path).get(key)
    if not isinstance(entry, dict) or "text" not in entry:
        raise Failure(NOT_FOUND, "not_found", f"nothing remembered under `{key}`")
    return {"key": key, "text": entry["text"]}


def summary(path: str = MEMORY) -> dict:
    memory = load(path)
    n = len(memory)
    if n == 0:
        return {"status": "ok", "summary": "Nothing remembered yet."}
    latest = sorted(memory.items(), key=lambda kv: -int(kv[1].get("at", 0)))[:10]
    items = [
        {"title": key, "at": entry.get("at"), "preview": str(entry.get("text", ""))[:60]}
        for key, entry in latest
    ]
    return {
        "status": "ok",
        "summary": f"{n} text{'s' if n != 1 else ''} remembered.",
        "items": items,
    }
