// js-greeter: a Butler faculty in JavaScript, built with componentize-js.
//
// The module's top level runs at build time (the engine is snapshotted), so nothing here
// touches `/data` or the host until a call arrives. There is no `node:fs`: files go through
// the WASI filesystem imports of the `faculty-wasi` world (`getDirectories()` yields the
// preopened `/data`).

import { log, nowMs } from 'butler:faculty/host@0.2.0';
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

const NAME_PATTERN = '[A-Za-z][A-Za-z -]{0,40}';
const TEMPLATE_MAX = 500;
const TEMPLATE_FILE = 'template.txt';
const DEFAULT_TEMPLATE = 'Hello, {name}!';

export const MANIFEST = {
  schemaVersion: 1,
  kind: 'faculty',
  id: 'js-greeter',
  name: 'Greeter (JavaScript)',
  description:
    'Greets people by name, with an optional template kept in the faculty\'s own data directory. ' +
    'Example faculty written in JavaScript (componentize-js).',
  commands: [
    {
      id: 'greet',
      description: 'Greet someone by name.',
      exec: ['self'],
      effect: 'read',
      input: {
        type: 'object',
        properties: { name: { type: 'string', pattern: `^${NAME_PATTERN}$` } },
        required: ['name'],
        additionalProperties: false,
      },
    },
    {
      id: 'set-template',
      description: 'Set the greeting template; `{name}` marks where the name goes.',
      exec: ['self'],
      effect: 'write',
      input: {
        type: 'object',
        properties: { template: { type: 'string', minLength: 1, maxLength: TEMPLATE_MAX } },
        required: ['template'],
        additionalProperties: false,
      },
    },
  ],
  reports: [{ id: 'about', name: 'About the greeter', exec: ['self'], shape: 'markdown' }],
};

// A typed failure. Thrown from an export that returns `result<_, failure>`, the bindings
// pass `payload` to the host as the `err` case: the WIT record `failure`, its `kind` a
// `failure-kind` case as a string ('invalid-input', 'not-found', 'unavailable', …) and its
// `details` an `option<string>` (`undefined` for none). The kind decides the caller's status.
class Failure extends Error {
  constructor(kind, code, message) {
    super(`${code}: ${message}`);
    this.payload = { kind, code, message, details: undefined };
  }
}

const invalid = (message) => new Failure('invalid-input', 'invalid_args', message);

// The host has checked the input against the command's `input` schema; the guest checks
// again. `u` makes `.` and lengths count characters, as JSON Schema does, not UTF-16 units.
const fullMatch = (pattern, value) => new RegExp(`^(?:${pattern})$`, 'u').test(value);
const charCount = (text) => [...text].length;

// The command's input document: a JSON object.
function parseInput(text) {
  let input;
  try {
    input = JSON.parse(text);
  } catch (e) {
    throw invalid(`the input is not JSON: ${e && e.message ? e.message : e}`);
  }
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw invalid('the input must be a JSON object');
  }
  return input;
}

// Host errors from the WASI bindings carry the `error-code` (e.g. `no-entry`) as `payload`.
const errorCode = (e) => (e && typeof e.payload === 'string' ? e.payload : String(e));

function dataDir() {
  const found = getDirectories().find(([, path]) => path === '/data');
  if (!found) throw new Failure('unavailable', 'io_error', '/data is not available');
  return found[0];
}

// Resource handles are released by `[Symbol.dispose]()` (the bindings fall back to
// `Symbol.for('dispose')` where the engine has no `Symbol.dispose`).
const DISPOSE = Symbol.dispose || Symbol.for('dispose');

function close(descriptor) {
  if (descriptor && typeof descriptor[DISPOSE] === 'function') descriptor[DISPOSE]();
}

// The file's text, or `null` when it does not exist.
function readText(dir, name) {
  let fd;
  try {
    fd = dir.openAt({}, name, {}, { read: true });
  } catch (e) {
    if (errorCode(e) === 'no-entry') return null;
    throw new Failure('unavailable', 'io_error', `/data/${name}: ${errorCode(e)}`);
  }
  try {
    const chunks = [];
    let offset = 0n;
    for (;;) {
      const [bytes, end] = fd.read(65536n, offset);
      chunks.push(bytes);
      offset += BigInt(bytes.length);
      if (end || bytes.length === 0) break;
    }
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) { all.set(c, at); at += c.length; }
    return new TextDecoder().decode(all);
  } catch (e) {
    throw new Failure('unavailable', 'io_error', `/data/${name}: ${errorCode(e)}`);
  } finally {
    close(fd);
  }
}

// Writes through a temp file in the same folder and a rename: never half a file.
function writeAtomic(dir, name, text) {
  const tmp = `.${name}.tmp`;
  let fd;
  try {
    fd = dir.openAt({}, tmp, { create: true, truncate: true }, { write: true });
    const bytes = new TextEncoder().encode(text);
    let offset = 0;
    while (offset < bytes.length) {
      offset += Number(fd.write(bytes.subarray(offset), BigInt(offset)));
    }
    fd.syncData();
    close(fd);
    fd = undefined;
    dir.renameAt(tmp, dir, name);
  } catch (e) {
    close(fd);
    try { dir.unlinkFileAt(tmp); } catch { /* already gone */ }
    throw new Failure('unavailable', 'io_error', `/data/${name}: ${errorCode(e)}`);
  }
}

function currentTemplate(dir) {
  const text = readText(dir, TEMPLATE_FILE);
  return text === null ? null : text.replace(/\r?\n$/, '');
}

function greet(input) {
  const { name } = input;
  if (name === undefined) throw invalid('missing field `name`');
  if (typeof name !== 'string' || !fullMatch(NAME_PATTERN, name)) throw invalid(`\`name\` must match ${NAME_PATTERN}`);
  const template = currentTemplate(dataDir()) ?? DEFAULT_TEMPLATE;
  return { greeting: template.split('{name}').join(name), at: Number(nowMs()) };
}

function setTemplate(input) {
  const { template } = input;
  if (template === undefined) throw invalid('missing field `template`');
  if (typeof template !== 'string' || charCount(template) < 1 || charCount(template) > TEMPLATE_MAX) {
    throw invalid(`\`template\` must be 1 to ${TEMPLATE_MAX} characters`);
  }
  if (!template.includes('{name}')) throw invalid('the template must contain `{name}`');
  writeAtomic(dataDir(), TEMPLATE_FILE, template);
  log('info', `template set (${charCount(template)} characters)`);
  return { template };
}

function about() {
  const template = currentTemplate(dataDir());
  const lines = [
    '# Greeter',
    '',
    'Greets people by name: `greet {"name": …}`.',
    '',
    template === null
      ? `No template set; the default is \`${DEFAULT_TEMPLATE}\`. Set one with \`set-template\`.`
      : `Current template: \`${template}\``,
  ];
  return { markdown: lines.join('\n') };
}

// Runs `thunk` and encodes its result as JSON; anything but a `Failure` becomes `internal_error`.
function run(thunk) {
  try {
    return JSON.stringify(thunk());
  } catch (e) {
    if (e instanceof Failure) throw e;
    throw new Failure('internal', 'internal_error', String(e && e.message ? e.message : e));
  }
}

export const guest = {
  describe() {
    return JSON.stringify(MANIFEST);
  },
  invoke(command, input) {
    switch (command) {
      case 'greet': return run(() => greet(parseInput(input)));
      case 'set-template': return run(() => setTemplate(parseInput(input)));
      default: throw new Failure('not-found', 'unknown_command', `no command \`${command}\``);
    }
  },
  report(id) {
    if (id === 'about') return run(about);
    throw new Failure('not-found', 'unknown_report', `no report \`${id}\``);
  },
};
