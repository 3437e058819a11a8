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
from wit_world.imports.butler_faculty_types import Failure, Level


def _run(thunk) -> str:
    try:
        return json.dumps(thunk(), ensure_ascii=False, separators=(",", ":"))
    except words.Failure as f:
        raise Err(Failure(code=f.code, message=f.message))
    except Err:
        raise
    except Exception as e:  # a bug, not the caller's fault: still a typed failure, not a trap
        raise Err(Failure(code="internal_error", message=f"{type(e).__name__}: {e}"))


def _remember(args, stdin):
    out = words.remember(args, stdin, host.now_ms())
    host.log(Level.INFO, f"remembered `{out['stored']}` ({out['count']} in total)")
    return out


class Guest(exports.Guest):
    def describe(self) -> str:
        return words.manifest_json()

    def invoke(self, command, args, stdin) -> str:
        parsed = words.Args(args)
        if command == "count":
            return _run(lambda: words.count(stdin))
        if command == "remember":
            return _run(lambda: _remember(parsed, stdin))
        if command == "recall":
            return _run(lambda: words.recall(parsed))
        raise Err(Failure(code="unknown_command", message=f"no command `{command}`"))

    def report(self, id) -> str:
        if id == "summary":
            return _run(words.summary)
        raise Err(Failure(code="unknown_report", message=f"no report `{id}`"))
