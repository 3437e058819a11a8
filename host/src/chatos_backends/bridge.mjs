// The Butler host's bridge to one ChatOS UI Apps plugin's backend.
//
// The host runs this file with Node, one process per plugin, and speaks to it in JSON
// lines: on stdin `{"id", "method", "params"}`, on stdout `{"id", "ok": true, "data"}` or
// `{"id", "ok": false, "message"}`. The plugin's `backend.entry` is an ES module exporting
// `createUiAppsBackend(ctx)`, which returns `{methods, dispose?}`; a call runs
// `methods[method](params, ctx)`. Before each call the entry file's modification time is
// compared with the loaded one: when it changed, the old instance's `dispose()` is awaited
// (its errors ignored) and the module is imported afresh.
//
// Whatever the backend writes to stdout goes to stderr (the host's log of the backend), so
// that only this bridge's answers reach the host.

import { mkdir, stat } from "node:fs/promises";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.env.BUTLER_UI_APP_BACKEND ?? "{}");
const answer = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);
for (const level of ["log", "info", "debug"]) {
  console[level] = (...args) => console.error(...args);
}

const llm = {
  async complete() {
    const error = new Error("llm.complete is unavailable: the host has no agent backend (503 agent_unavailable)");
    error.status = 503;
    error.code = "agent_unavailable";
    throw error;
  },
};

function context() {
  const { pluginId, pluginDir, dataDir, stateDir, sessionRoot, projectRoot } = config;
  return { pluginId, pluginDir, dataDir, stateDir, sessionRoot, projectRoot, llm };
}

let loaded = null;
let loading = Promise.resolve();

async function load() {
  const { mtimeMs } = await stat(config.entry);
  if (loaded && loaded.mtimeMs === mtimeMs) {
    return loaded.instance;
  }
  if (loaded && typeof loaded.instance.dispose === "function") {
    try {
      await loaded.instance.dispose();
    } catch (error) {
      console.error(`dispose() failed: ${error?.stack ?? error}`);
    }
  }
  loaded = null;
  const module = await import(`${pathToFileURL(config.entry).href}?mtime=${mtimeMs}`);
  if (typeof module.createUiAppsBackend !== "function") {
    throw new Error(`Plugin backend must export "createUiAppsBackend" (${config.pluginId})`);
  }
  await mkdir(config.dataDir, { recursive: true });
  const instance = await module.createUiAppsBackend(context());
  if (!instance || typeof instance.methods !== "object" || instance.methods === null) {
    throw new Error(`createUiAppsBackend() must return { methods } (${config.pluginId})`);
  }
  loaded = { mtimeMs, instance };
  console.error(`loaded ${config.entry}`);
  return instance;
}

// One load at a time: calls that arrive during a reload wait for it.
function backend() {
  const next = loading.then(load, load);
  loading = next.catch(() => {});
  return next;
}

async function call(request) {
  const instance = await backend();
  const method = request.method;
  if (!Object.prototype.hasOwnProperty.call(instance.methods, method) || typeof instance.methods[method] !== "function") {
    throw new Error(`Method not found: ${method}`);
  }
  return instance.methods[method](request.params ?? {}, context());
}

function reply(id, result) {
  let line;
  try {
    line = JSON.stringify(result.ok ? { id, ok: true, data: result.data ?? null } : { id, ok: false, message: result.message });
  } catch (error) {
    line = JSON.stringify({ id, ok: false, message: `the result is not JSON: ${error?.message ?? error}` });
  }
  answer(`${line}\n`);
}

createInterface({ input: process.stdin, crlfDelay: Infinity }).on("line", (text) => {
  let request;
  try {
    request = JSON.parse(text);
  } catch {
    return;
  }
  call(request).then(
    (data) => reply(request.id, { ok: true, data }),
    (error) => reply(request.id, { ok: false, message: String(error?.message ?? error) }),
  );
});
