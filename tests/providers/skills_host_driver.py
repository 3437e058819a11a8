"""Drives the hub as the host of the conformance suite's Skills client scenarios
(`sep-2640-client-*`): the suite starts its mock skills server and runs this script with
the server's URL last; the script makes the running host a client of that server and acts
as an agent through the hub.

    python3 skills_host_driver.py BUTLER WORKDIR URL

- imports and enables a capability package whose MCP server is URL (remote, over HTTP), so
  the hub connects to the mock server as one of its providers;
- through `butler mcp stdio` (2026-07-28 requests), lists the skills; in
  `sep-2640-client-no-prefetch` it stops there: whatever the hub fetched so far it fetched
  ahead of need;
- else it loads the first skill — reads its `SKILL.md` through the hub — and, only when the
  hub passed it on, reads the skill's other listed files, as an agent following the skill
  would. The hub must refuse a `SKILL.md` whose content differs from the entry (digest,
  size, front matter), so the agent never goes on to the supporting file;
- disables the package again.

The scenario's name comes in MCP_CONFORMANCE_SCENARIO (the suite sets it).
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

BUTLER, WORKDIR, URL = sys.argv[1], sys.argv[2], sys.argv[-1]
SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
PACKAGE = "conformance." + SCENARIO.replace("sep-2640-client-", "").replace("-", "")
ENV = dict(os.environ, BUTLER_WORKDIR=WORKDIR)
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "skills-host-driver", "version": "1"},
}


def butler(*args):
    done = subprocess.run([BUTLER, *args], env=ENV, capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        sys.exit(f"butler {' '.join(args)}: {done.stdout}{done.stderr}")


def main():
    with tempfile.TemporaryDirectory() as folder:
        package = pathlib.Path(folder) / "package"
        package.mkdir()
        manifest = {"schemaVersion": 1, "id": PACKAGE, "name": "Conformance skills", "version": "1.0.0",
                    "adapters": {"mcp": {"transport": "http", "url": URL}}}
        (package / "suzu-capability.json").write_text(json.dumps(manifest))
        butler("import", str(package))
        butler("capability", "enable", PACKAGE)
        try:
            act()
        finally:
            butler("capability", "disable", PACKAGE)


def act():
    bridge = subprocess.Popen([BUTLER, "mcp", "stdio", "--workdir", WORKDIR], env=ENV, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    next_id = iter(range(1, 1000))

    def ask(method, params):
        request = {"jsonrpc": "2.0", "id": next(next_id), "method": method, "params": {**params, "_meta": META}}
        bridge.stdin.write(json.dumps(request) + "\n")
        bridge.stdin.flush()
        return json.loads(bridge.stdout.readline())

    try:
        skills = []
        deadline = time.monotonic() + 15
        while not skills and time.monotonic() < deadline:
            skills = ask("skills/list", {}).get("result", {}).get("skills", [])
            if not skills:
                time.sleep(0.3)
        if not skills:
            sys.exit("the hub lists no skill of the mock server")
        if SCENARIO == "sep-2640-client-no-prefetch":
            return
        skill = skills[0]
        loaded = ask("resources/read", {"uri": skill["uri"]})
        if "error" in loaded:
            print(f"refused {skill['uri']}: {loaded['error'].get('message')}")
            return
        for file in skill.get("resources", []):
            if file["uri"] != skill["uri"]:
                ask("resources/read", {"uri": file["uri"]})
    finally:
        bridge.stdin.close()
        bridge.wait(timeout=10)


if __name__ == "__main__":
    main()
