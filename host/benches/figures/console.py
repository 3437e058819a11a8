"""Browser side of the console figures (C1-C3), run by host/benches/figures/console.rs.

Usage:
  console.py load FULL_ORIGIN EXPECTED EMPTY_ORIGIN RUNS
      C1/C2: RUNS cold loads of the review queue on FULL_ORIGIN (EXPECTED pending
      candidates), interleaved with cold loads of the same console on EMPTY_ORIGIN (no
      candidates, no cards) and with `about:blank` navigations. Prints one JSON object.
  console.py idle ORIGIN EXPECTED
      C3: opens the review queue, waits until it is interactive, prints `ready`, and keeps
      the page open and untouched until its standard input closes.

Runs the system Chromium (CHROMIUM, default /usr/bin/chromium) headless through Playwright,
as the console's browser tests do. Every load is in a fresh browser context (empty cache).

"Interactive" is measured in the page itself: an init script (run before the console's own
scripts) watches the DOM and records `performance.now()` (milliseconds since the navigation
started) at the first moment the view has rendered (`body[data-ready=true]`) and, when
candidates are expected, all of them are on the page and the first Approve button is
enabled; for an empty queue, its empty state is shown.
"""

import json
import os
import sys
import time

from playwright.sync_api import sync_playwright

WATCH = """
(() => {
  const expected = %d;
  const done = () => {
    if (!document.body || document.body.dataset.ready !== 'true') return false;
    if (expected === 0) return !!document.querySelector('#queue .empty');
    if (document.querySelectorAll('[data-candidate]').length < expected) return false;
    const first = document.querySelector("[data-candidate] button[data-act='approve']");
    return !!first && !first.disabled;
  };
  const observer = new MutationObserver(() => {
    if (window.__interactiveAt === undefined && done()) {
      window.__interactiveAt = performance.now();
      observer.disconnect();
    }
  });
  observer.observe(document, { subtree: true, childList: true, attributes: true });
})();
"""


def launch(p):
    return p.chromium.launch(
        executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )


def open_queue(browser, origin, expected):
    """A fresh context on the review queue, once interactive: (context, page, ms, responses)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    context.add_init_script(WATCH % expected)
    page = context.new_page()
    page.set_default_timeout(120_000)
    responses = []
    page.on("requestfinished", lambda r: responses.append(r))
    page.goto(f"{origin}/myspace-butler/#/review")
    # Polled from outside (page.wait_for_function evaluates strings, which the console's
    # CSP forbids); the time itself is taken in the page, so polling does not add to it.
    deadline = time.monotonic() + 120
    ms = None
    while ms is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the review queue never became interactive")
        time.sleep(0.01)
        ms = page.evaluate("window.__interactiveAt === undefined ? null : window.__interactiveAt")
    return context, page, ms, responses


def transfer(responses):
    """Bytes of the page and its assets (not API answers): on the wire (headers + body as
    sent) and uncompressed (body as decoded)."""
    wire = decoded = count = 0
    for request in responses:
        if "/myspace-butler/api/" in request.url:
            continue
        sizes = request.sizes()
        response = request.response()
        if response is None:
            continue
        wire += sizes["responseHeadersSize"] + sizes["responseBodySize"]
        decoded += len(response.body())
        count += 1
    return {"wire": wire, "decoded": decoded, "files": count}


def load(full, expected, empty, runs):
    out = {"full": [], "empty": [], "blank": []}
    with sync_playwright() as p:
        browser = launch(p)
        try:
            # One warm-up of each (the browser's own first-use costs).
            for origin, n in ((full, expected), (empty, 0)):
                context, _, _, _ = open_queue(browser, origin, n)
                context.close()
            for run in range(runs):
                context, _, ms, responses = open_queue(browser, full, expected)
                out["full"].append(ms)
                if run == 0:
                    out["transfer"] = transfer(responses)
                context.close()
                context, _, ms, _ = open_queue(browser, empty, 0)
                out["empty"].append(ms)
                context.close()
                context = browser.new_context()
                page = context.new_page()
                start = time.perf_counter()
                page.goto("about:blank")
                out["blank"].append((time.perf_counter() - start) * 1000)
                context.close()
        finally:
            browser.close()
    print(json.dumps(out))


def idle(origin, expected):
    with sync_playwright() as p:
        browser = launch(p)
        try:
            context, page, ms, _ = open_queue(browser, origin, expected)
            print("ready", flush=True)
            sys.stdin.read()
            context.close()
        finally:
            browser.close()


def main():
    mode = sys.argv[1]
    if mode == "load":
        load(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    elif mode == "idle":
        idle(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
