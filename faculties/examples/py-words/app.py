"""py-words: a Butler faculty in Python, built with componentize-py.

componentize-py looks in this module for a class named after the exported interface
(`guest` -> `Guest`). Module-level code runs at build time (the interpreter is
snapshotted), so nothing here touches `/data` or the host until a call arrives.
"""

import json

import words
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.butler_faculty_types import Failure, FailureKind, Level

# `words` names kinds as the WIT spells them; the bindings have an enum.
KINDS = {
    words.INVALID_INPUT: FailureKind.INVALID_INPUT,
    words.NOT_FOUND: FailureKind.NOT_FOUND,
    words.UNAVAILABLE: FailureKind.UNAVAILABLE,
    words.FAILED: FailureKind.FAILED,
    words.INTERNAL: FailureKind.INTERNAL,
}


def _fail(kind: FailureKind, code: str, message: str) -> Err:
    return Err(Failure(kind=kind, code=code, message=message, details=None))


def _run(thunk) -> str:
    try:
        return json.dumps(thunk(), ensure_ascii=False, separators=(",", ":"))
    except words.Failure as f:
        raise _fail(KINDS.get(f.kind, FailureKind.INTERNAL), f.code, f.message)
    except Err:
        raise
    except Exception as e:  # a bug, not the caller's fault: still a typed failure, not a trap
        raise _fail(FailureKind.INTERNAL, "internal_error", f"{type(e).__name__}: {e}")


def _remember(input):
    out = words.remember(input, host.now_ms())
    host.log(Level.INFO, f"remembered `{out['stored']}` ({out['count']} in total)")
    return out


class Guest(exports.Guest):
    def describe(self) -> str:
        return words.manifest_json()

    def invoke(self, command, input) -> str:
        if command == "count":
            return _run(lambda: words.count(words.parse_input(input)))
        if command == "remember":
            return _run(lambda: _remember(words.parse_input(input)))
        if command == "recall":
            return _run(lambda: words.recall(words.parse_input(input)))
        raise _fail(FailureKind.NOT_FOUND, "unknown_command", f"no command `{command}`")

    def report(self, id) -> str:
        if id == "summary":
            return _run(words.summary)
        raise _fail(FailureKind.NOT_FOUND, "unknown_report", f"no report `{id}`")
