"""py-words: the faculty's logic, free of WIT bindings.

`app.py` wires these functions to the component's `guest` export; keeping them here lets
them run (and be checked) under a plain CPython too. Failures are raised as `Failure`
(a stable `code` plus a message for people) and turned into the WIT `failure` by `app.py`.
"""

import json
import os
import re
from collections import Counter

MEMORY = "/data/memory.json"

KEY_PATTERN = "[a-z0-9-]{1,32}"
# Bounded patterns the host checks before the call. Rust's `regex` refuses
# `(?s).{1,20000}` (compiled size over 10 MiB), so stay at or below 10000.
TEXT_PATTERN = "(?s).{1,10000}"
NOTE_PATTERN = "(?s).{1,2000}"

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
            "description": "Count the words of a text (on stdin) and name the five most frequent.",
            "exec": ["self"],
            "effect": "read",
            "args": [{"name": "text", "pattern": TEXT_PATTERN, "required": True, "stdin": True}],
        },
        {
            "id": "remember",
            "description": "Remember a text (on stdin) under a key.",
            "exec": ["self"],
            "effect": "write",
            "args": [
                {"name": "key", "pattern": KEY_PATTERN, "required": True, "positional": True},
                {"name": "text", "pattern": NOTE_PATTERN, "required": True, "stdin": True},
            ],
        },
        {
            "id": "recall",
            "description": "Give back the text remembered under a key.",
            "exec": ["self"],
            "effect": "read",
            "args": [{"name": "key", "pattern": KEY_PATTERN, "required": True, "positional": True}],
        },
    ],
    "reports": [{"id": "summary", "name": "Remembered texts", "exec": ["self"], "shape": "status"}],
}

WORD = re.compile(r"\w+(?:['’]\w+)*")


class Failure(Exception):
    """A typed failure: `code` is stable snake_case, `message` is for people."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Args:
    """The host's argument list: positional values and `--name value` pairs."""

    def __init__(self, items):
        self.positional = []
        self.named = {}
        it = iter(items)
        for item in it:
            if item.startswith("--") and len(item) > 2:
                self.named[item[2:]] = next(it, "")
            else:
                self.positional.append(item)

    def at(self, index):
        return self.positional[index] if index < len(self.positional) else None


def manifest_json() -> str:
    return json.dumps(MANIFEST, ensure_ascii=False, separators=(",", ":"))


def require_key(args: Args) -> str:
    key = args.at(0)
    if key is None:
        raise Failure("invalid_args", "missing argument `key`")
    if not re.fullmatch(KEY_PATTERN, key):
        raise Failure("invalid_args", f"`key` must match {KEY_PATTERN}")
    return key


def require_text(stdin, pattern: str) -> str:
    if stdin is None:
        raise Failure("invalid_args", "the text comes on stdin")
    if not re.fullmatch(pattern, stdin):
        raise Failure("invalid_args", f"the text must match {pattern}")
    return stdin


def count(stdin) -> dict:
    text = require_text(stdin, TEXT_PATTERN)
    words = [w.lower() for w in WORD.findall(text)]
    counts = Counter(words)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {"words": len(words), "top": [[w, n] for w, n in top]}


def load(path: str = MEMORY) -> dict:
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as e:
        raise Failure("invalid_json", f"{path}: {e}") from e
    except OSError as e:
        raise Failure("io_error", f"{path}: {e}") from e
    if not isinstance(data, dict):
        raise Failure("invalid_json", f"{path}: expected an object of entries")
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
        raise Failure("io_error", f"{path}: {e}") from e


def remember(args: Args, stdin, now_ms: int, path: str = MEMORY) -> dict:
    key = require_key(args)
    text = require_text(stdin, NOTE_PATTERN)
    memory = load(path)
    memory[key] = {"text": text, "at": now_ms}
    write_atomic(path, json.dumps(memory, ensure_ascii=False, sort_keys=True))
    return {"stored": key, "count": len(memory)}


def recall(args: Args, path: str = MEMORY) -> dict:
    key = require_key(args)
    entry = load(path).get(key)
    if not isinstance(entry, dict) or "text" not in entry:
        raise Failure("not_found", f"nothing remembered under `{key}`")
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
