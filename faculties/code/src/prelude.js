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

  const shown = (value) => {
    if (typeof value === 'string') return value;
    try {
      const text = JSON.stringify(value);
      return text === undefined ? String(value) : text;
    } catch (e) {
      return String(value);
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
      const error = new Error(name + ': ' + (texts.join('\n') || 'the tool failed'));
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
