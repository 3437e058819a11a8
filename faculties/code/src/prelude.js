// What a program sees besides the language: `tools`, `console`. Installed once per run,
// before the program; the natives it closes over are removed from the global object.
(function () {
  const native = {
    call: globalThis.__butlerCallTool,
    list: globalThis.__butlerListTools,
    log: globalThis.__butlerLog,
  };
  delete globalThis.__butlerCallTool;
  delete globalThis.__butlerListTools;
  delete globalThis.__butlerLog;

  // A logged value as text: strings as they are, errors as `Name: message`, the rest as
  // JSON (errors inside as text, a value met again as "[Circular]"), else as String().
  const shown = (value) => {
    if (typeof value === 'string') return value;
    if (value instanceof Error) return String(value);
    try {
      const seen = new WeakSet();
      const text = JSON.stringify(value, (key, v) => {
        if (v instanceof Error) return String(v);
        if (typeof v === 'object' && v !== null) {
          if (seen.has(v)) return '[Circular]';
          seen.add(v);
        }
        return v;
      });
      return text === undefined ? String(value) : text;
    } catch (e) {
      try {
        return String(value);
      } catch (e2) {
        return '[a value that cannot be shown]';
      }
    }
  };
  const logger = (level) => (...values) => native.log(level, values.map(shown).join(' '));
  globalThis.console = Object.freeze({
    log: logger('log'),
    info: logger('info'),
    warn: logger('warn'),
    error: logger('error'),
    debug: logger('debug'),
  });

  // A tool's `tools/call` result as a program wants it: its structured content, else its
  // text; a tool's own error throws, with the result kept on the error.
  const unwrap = (name, text) => {
    const result = JSON.parse(text);
    const content = Array.isArray(result.content) ? result.content : [];
    const texts = content.filter((c) => c && c.type === 'text').map((c) => c.text);
    if (result.isError === true) {
      const said = texts.join('\n') || 'the tool failed';
      const error = new Error(said.startsWith(name + ':') ? said : name + ': ' + said);
      error.result = result;
      throw error;
    }
    if (result.structuredContent !== undefined) return result.structuredContent;
    if (texts.length === content.length) return texts.join('\n');
    return content;
  };
  const call = (name, args) =>
    new Promise((resolve) => resolve(unwrap(String(name), native.call(String(name), JSON.stringify(args === undefined ? {} : args)))));
  const list = () => new Promise((resolve) => resolve(JSON.parse(native.list())));
  const namespace = (ns) =>
    new Proxy({}, { get: (_, tool) => (typeof tool === 'string' ? (args) => call(ns + '__' + tool, args) : undefined) });
  const own = Object.freeze({ call, list });
  globalThis.tools = new Proxy(own, {
    get: (target, key) => (key in target ? target[key] : typeof key === 'string' ? namespace(key) : undefined),
  });
})();
