"""Browser scenarios for the console, driven by tests/e2e/console.rs.

Usage: drive.py SCENARIO ORIGIN SCREENSHOT_DIR [JSON_ARGS]

Runs the system Chromium (CHROMIUM, default /usr/bin/chromium) headless through Playwright,
never a downloaded browser. Prints one JSON object on the last line of stdout with what
the scenario saw; failures raise (non-zero exit), and the Rust test asserts the rest
through the API.
"""

import json
import os
import re
import sys
import urllib.request

from playwright.sync_api import expect, sync_playwright

LIMIT_MS = 30_000


def launch(p):
    return p.chromium.launch(
        executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )


class Page:
    def __init__(self, browser, origin, shots, viewport=(1280, 800), locale="en-US", scheme="light"):
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, locale=locale,
                                           color_scheme=scheme)
        self.page = self.context.new_page()
        self.page.set_default_timeout(LIMIT_MS)
        expect.set_options(timeout=LIMIT_MS)
        self.origin = origin
        self.shots = shots
        self.errors = []
        self.requests = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append((r.method, r.url, r.post_data)))
        self.login()

    def login(self):
        """Visits a one-time login link, as the owner does with the one `butler serve` prints."""
        token = os.environ.get("BUTLER_OWNER_TOKEN")
        if not token:
            return
        request = urllib.request.Request(
            f"{self.origin}/myspace-butler/api/console/links",
            data=b"{}",
            headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
            method="POST",
        )
        with urllib.request.urlopen(request) as response:
            url = json.loads(response.read())["data"]["url"]
        self.page.goto(url)
        self.page.wait_for_url(f"{self.origin}/myspace-butler/**")
        # The login hands the page its session's proof in the fragment: kept, and taken out
        # of the address bar.
        self.page.wait_for_function(
            "() => /^[0-9a-f]{64}$/.test(localStorage.getItem('butler.proof') || '') && !location.hash.includes('proof')")
        # Leave the console the login opened: each scenario opens its own view (a hash
        # change alone would keep this page, and its event stream, alive).
        self.page.goto("about:blank")

    def open(self, view=""):
        self.page.goto(f"{self.origin}/myspace-butler/#/{view}")
        self.ready()

    def ready(self):
        self.page.wait_for_selector("body[data-ready='true']")

    def shot(self, name):
        os.makedirs(self.shots, exist_ok=True)
        self.page.screenshot(path=os.path.join(self.shots, f"{name}.png"), full_page=True)

    def pipeline_calls(self, action):
        calls = []
        for method, url, body in self.requests:
            if method == "POST" and url.endswith("/pipeline") and body:
                sent = json.loads(body)
                if sent.get("action") == action:
                    calls.append(sent.get("args", {}))
        return calls


def owner_call(origin, token, action, args):
    request = urllib.request.Request(
        f"{origin}/myspace-butler/api/pipeline",
        data=json.dumps({"action": action, "args": args}).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())["data"]


def smoke(browser, origin, shots, args):
    """Every view loads without errors; screenshots of each, in both languages and at 360 px."""
    page = Page(browser, origin, shots)
    views = ["review", "library", "tools", "services", "butler", "mcp", "mcp/activity", "packages", "diagnostics",
             "settings"]
    for view in views:
        page.open(view)
        page.shot(view.replace("/", "-"))
    # The Diagnostics tab says there is a problem, from any view.
    badge = page.page.locator("nav a[data-view='diagnostics'] [data-count='diagnostics']")
    expect(badge).to_have_text(str(args.get("problems", 0)))
    page.page.click("#lang")
    page.ready()
    chinese = page.page.locator("nav a[data-view='review']").inner_text()
    page.shot("diagnostics-zh")
    narrow = Page(browser, origin, shots, viewport=(360, 740), locale="zh-CN")
    narrow.open("review")
    narrow_lang = narrow.page.evaluate("document.documentElement.lang")
    narrow.shot("review-360")
    overflow = narrow.page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    # The Markdown renderer keeps links to http(s) only and never makes markup from text.
    rendered = page.page.evaluate(
        """async () => {
            const { renderMarkdown } = await import('/myspace-butler/assets/md.js');
            const el = renderMarkdown('# T\\n[a](javascript:alert(1)) [b](https://example.org) <img src=x onerror=alert(1)>');
            return { links: [...el.querySelectorAll('a')].map((a) => a.getAttribute('href')),
                     imgs: el.querySelectorAll('img').length, text: el.textContent };
        }"""
    )
    return {"errors": page.errors + narrow.errors, "chinese": chinese, "narrowLang": narrow_lang,
            "narrowOverflow": overflow, "markdown": rendered}


def review(browser, origin, shots, args):
    """Approve one, reject one with a reason, and fail to approve one decided behind the page's back."""
    page = Page(browser, origin, shots)
    # This page does not hear of changes (as if its event stream had dropped), so it still
    # shows the candidate decided elsewhere below.
    page.page.route(re.compile(r"/myspace-butler/api/events(\?|$)"), lambda route: route.abort())
    page.open("review")
    for cid in (args["approve"], args["reject"], args["stale"]):
        expect(page.page.locator(f"[data-candidate='{cid}']")).to_be_visible()
    page.shot("review-queue")
    quote_check = page.page.locator(f"[data-candidate='{args['approve']}'] .checks li").first.inner_text()
    # Decided elsewhere (the CLI, another tab) while this page still shows it.
    prepared = owner_call(origin, args["token"], "review.prepare", {"id": args["stale"]})
    owner_call(origin, args["token"], "review.reject", {
        "id": args["stale"], "revision": prepared["revision"], "contentHash": prepared["contentHash"],
        "token": prepared["token"], "idempotencyKey": "elsewhere"})

    approve = page.page.locator(f"[data-candidate='{args['approve']}']")
    approve.locator("button[data-act='approve']").click()
    expect(approve.locator(".outcome.ok")).to_be_visible()

    reject = page.page.locator(f"[data-candidate='{args['reject']}']")
    reject.locator("input.reason").fill("not what I meant")
    reject.locator("button[data-act='reject']").click()
    expect(reject.locator(".outcome.ok")).to_be_visible()

    stale = page.page.locator(f"[data-candidate='{args['stale']}']")
    stale.locator("button[data-act='approve']").click()
    expect(stale.locator(".outcome.error")).to_be_visible()
    error_code = stale.locator(".outcome.error").get_attribute("data-code")
    # A retry would follow the failure at once; give it a moment to show itself.
    page.page.wait_for_timeout(1500)
    page.shot("review-decided")
    stale_calls = [c for c in page.pipeline_calls("review.prepare") if c.get("id") == args["stale"]]
    stale_approvals = [c for c in page.pipeline_calls("review.approve") if c.get("id") == args["stale"]]
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    stale_still_shown = stale.is_visible()
    # Reloaded, the history lists what was decided: approved, and rejected with its reason.
    page.page.reload()
    page.ready()
    expect(page.page.locator(f"#decided tr[data-decided='{args['reject']}']")).to_contain_text("not what I meant")
    expect(page.page.locator(f"#decided tr[data-decided='{args['approve']}']")).to_contain_text("approved")
    history = page.page.locator("#decided tbody tr").all_inner_texts()
    return {"errors": errors, "staleCode": error_code, "stalePrepares": len(stale_calls), "quoteCheck": quote_check,
            "history": history,
            "staleApprovals": len(stale_approvals), "staleStillShown": stale_still_shown}


def supervise(browser, origin, shots, args):
    """Start a tool, watch its state, cost and log (filtered, stderr only, paused,
    downloaded), stop it; stop a crash-looping one from its card and from the drawer."""
    page = Page(browser, origin, shots)
    page.open("tools")
    card = page.page.locator(f"article.item[data-id='{args['id']}']")
    expect(card).to_have_attribute("data-state", "stopped")
    card.locator("button[data-action='start']").click()
    card = page.page.locator(f"article.item[data-id='{args['id']}']")
    expect(card).to_have_attribute("data-state", "running")
    expect(card.locator("[data-meta='rss']")).to_contain_text("MB")
    expect(card.locator("[data-meta='cpu']")).to_contain_text("%")
    page.page.locator(f"article.item[data-id='{args['id']}'] button", has_text="Logs").click()
    log = page.page.locator("dialog.logview pre.log")
    expect(log).to_contain_text(args["line"])
    expect(log).to_contain_text(args["errLine"])
    expect(page.page.locator("dialog.logview [data-log-state='live']")).to_be_visible()
    tools = page.page.locator("dialog.logview")
    tools.locator("[data-log='filter']").fill("no-such-text")
    expect(log).not_to_contain_text(args["line"])
    tools.locator("[data-log='filter']").fill("")
    tools.locator("[data-log='stderr']").check()
    expect(log).to_contain_text(args["errLine"])
    expect(log).not_to_contain_text(args["line"])
    tools.locator("[data-log='stderr']").uncheck()
    expect(log).to_contain_text(args["line"])
    tools.locator("[data-log='pause']").click()
    expect(tools.locator("[data-log='pause']")).to_have_attribute("aria-pressed", "true")
    tools.locator("[data-log='pause']").click()
    expect(tools.locator("[data-log='pause']")).to_have_attribute("aria-pressed", "false")
    with page.page.expect_download() as info:
        tools.locator("[data-log='download']").click()
    download = info.value
    downloaded = open(download.path(), encoding="utf-8").read()
    page.shot("tool-log")
    page.page.locator("dialog.logview button.close").click()
    page.page.locator(f"article.item[data-id='{args['id']}'] button[data-action='stop']").click()
    stopped = page.page.locator(f"article.item[data-id='{args['id']}']")
    expect(stopped).to_have_attribute("data-state", "stopped")
    expect(stopped.locator("[data-meta='last-exit']")).to_be_visible()
    page.shot("tools-stopped")

    # A crash-looping tool waits in backoff: it can be stopped from its card...
    crasher = page.page.locator(f"article.item[data-id='{args['crasher']}']")
    crasher.locator("button[data-action='start']").click()
    crasher = page.page.locator(f"article.item[data-id='{args['crasher']}'][data-state='backoff']")
    expect(crasher).to_be_visible(timeout=20000)
    expect(crasher.locator("[data-meta='last-exit']")).to_contain_text("3")
    crasher.locator("button[data-action='stop']").click()
    expect(page.page.locator(f"article.item[data-id='{args['crasher']}']")).to_have_attribute("data-state", "stopped")
    # ... and from the drawer.
    page.page.locator(f"article.item[data-id='{args['crasher']}'] button[data-action='start']").click()
    expect(page.page.locator(f"article.item[data-id='{args['crasher']}'][data-state='backoff']")).to_be_visible(timeout=20000)
    page.page.locator("button.manage").click()
    row = page.page.locator("dialog.drawer li", has=page.page.locator(f"code:text-is('{args['crasher']}')"))
    row.locator("button[data-action='stop']").click()
    expect(page.page.locator(f"article.item[data-id='{args['crasher']}']")).to_have_attribute("data-state", "stopped")
    page.page.locator("dialog.drawer button[data-drawer='cancel']").click()
    # Its details: what runs, and the runs that ended (each with exit 3).
    page.page.locator(f"article.item[data-id='{args['crasher']}'] button[data-action='details']").click()
    details = page.page.locator("dialog.details-view")
    expect(details.locator("tr[data-detail='command'] code")).to_contain_text("sh -c")
    expect(details.locator("tr[data-run]").first).to_be_visible()
    runs = details.locator("tr[data-run]").all_inner_texts()
    page.shot("tool-details")
    details.locator("button.close").click()
    return {"errors": page.errors, "downloaded": downloaded, "runs": runs}


def layout(browser, origin, shots, args):
    """Store an item from the drawer, show resident only, reload; then a failed save rolls back and keeps the draft."""
    page = Page(browser, origin, shots)
    page.open("tools")
    board = page.page.locator("#tools-board")
    ids = args["ids"]
    for i in ids:
        expect(board.locator(f"article.item[data-id='{i}']")).to_be_visible()
    page.page.click("button.manage")
    drawer = page.page.locator("dialog.drawer")
    drawer.locator(f"input[data-id='{ids[1]}']").uncheck()
    page.shot("layout-drawer")
    drawer.locator("button[data-drawer='save']").click()
    expect(drawer).to_have_count(0)
    page.page.click("button[data-mode='resident']")
    expect(board.locator(f"article.item[data-id='{ids[1]}']")).to_have_count(0)
    expect(page.page.locator("button.manage")).to_contain_text("1")

    page.page.reload()
    page.ready()
    board = page.page.locator("#tools-board")
    expect(page.page.locator("button[data-mode='resident']")).to_have_attribute("aria-pressed", "true")
    expect(board.locator(f"article.item[data-id='{ids[1]}']")).to_have_count(0)
    expect(board.locator(f"article.item[data-id='{ids[0]}']")).to_be_visible()
    # Search covers stored items too, marked as such.
    page.page.fill("#tools-search", ids[1])
    expect(board.locator(f"article.item[data-id='{ids[1]}'] .stored-mark")).to_be_visible()
    page.page.fill("#tools-search", "")

    # The next save fails.
    page.page.route("**/myspace-butler/api/layout", lambda route: route.fulfill(
        status=500, content_type="application/json",
        body=json.dumps({"ok": False, "error": {"code": "layout_write_failed", "message": "disk full"}}))
        if route.request.method == "PUT" else route.continue_())
    page.page.click("button.manage")
    drawer = page.page.locator("dialog.drawer")
    drawer.locator(f"input[data-id='{ids[2]}']").uncheck()
    drawer.locator("button[data-drawer='save']").click()
    expect(drawer.locator(".outcome.error")).to_contain_text("disk full")
    kept_draft = not drawer.locator(f"input[data-id='{ids[2]}']").is_checked()
    expect(board.locator(f"article.item[data-id='{ids[2]}']")).to_be_visible()
    page.shot("layout-failed-save")
    drawer.locator("button[data-drawer='cancel']").click()
    return {"errors": [e for e in page.errors if "500" not in e], "keptDraft": kept_draft}


def panel(browser, origin, shots, args):
    """A panel action opens at its panelSize, shrunk on a narrow screen; a post action shows its outcome."""
    sizes = []
    for viewport in ((1280, 800), (360, 640)):
        page = Page(browser, origin, shots, viewport=viewport)
        page.open("tools")
        page.page.locator(f"article.item[data-id='{args['id']}'] button[data-mode='panel']").click()
        frame = page.page.locator("dialog.panel iframe")
        expect(frame).to_be_visible()
        box = frame.bounding_box()
        sizes.append({"width": round(box["width"]), "height": round(box["height"]),
                      "viewport": list(viewport)})
        page.shot(f"panel-{viewport[0]}")
        page.page.locator("dialog.panel button.close").click()
        page.page.locator(f"article.item[data-id='{args['id']}'] button[data-mode='post']").click()
        outcome = page.page.locator(f"article.item[data-id='{args['id']}'] .outcome")
        expect(outcome).to_contain_text(args["postStatus"])
        # A re-render (here a search; live updates do the same) keeps the outcome on the card.
        page.page.fill("input[type='search']", args["id"])
        expect(outcome).to_contain_text(args["postStatus"])
        page.page.fill("input[type='search']", "")
    return {"errors": [e for e in page.errors if "405" not in e], "sizes": sizes}


def xss(browser, origin, shots, args):
    """Script in a manifest name, description and a Markdown report stays text."""
    page = Page(browser, origin, shots)
    page.open("tools")
    card = page.page.locator(f"article.item[data-id='{args['id']}']")
    name = card.locator("h3.name").inner_text()
    images = card.locator("img").count()
    links = page.page.evaluate("[...document.querySelectorAll('a')].map((a) => a.getAttribute('href') || '')")
    page.shot("xss-tools")
    page.open("butler")
    report = page.page.locator("[data-faculty='probe'] [data-report='notes']")
    expect(report.locator(".md")).to_be_visible()
    report_text = report.inner_text()
    scripts = page.page.evaluate("document.querySelectorAll('main script').length")
    page.shot("xss-butler")
    pwned = page.page.evaluate("window.__pwned === undefined ? null : window.__pwned")
    # The probe's deliberately broken reports fail to load; those are not the page's errors.
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "name": name, "images": images, "links": links, "reportText": report_text,
            "scripts": scripts, "pwned": pwned}


def library(browser, origin, shots, args):
    """Every card listed without a query; a suspended card says which check failed; a kind filter."""
    page = Page(browser, origin, shots)
    page.open("library")
    held = page.page.locator(f"article[data-card='{args['suspended']}']")
    expect(held).to_have_attribute("data-state", "suspended")
    expect(held.locator(".held .reasons li").first).to_contain_text(args["reason"])
    archived = page.page.locator(f"article[data-card='{args['archived']}']")
    expect(archived).to_have_attribute("data-state", "archived")
    reason = held.locator(".held").inner_text()
    page.shot("library-all")
    page.page.select_option("#card-kind", "rule")
    expect(page.page.locator(f"article[data-card='{args['rule']}']")).to_be_visible()
    expect(page.page.locator(f"article[data-card='{args['suspended']}']")).to_have_count(0)
    shown_rule = page.page.locator("#card-results article").count()
    page.shot("library-rules")
    # A search marks a held card and says why, as the list does.
    page.page.select_option("#card-kind", "")
    page.page.fill("#card-query", args["suspended"])
    page.page.click("form[role='search'] button[type='submit']")
    found = page.page.locator(f"#card-results article[data-card='{args['suspended']}']")
    expect(found).to_have_attribute("data-state", "suspended")
    expect(found.locator(".held .reasons li").first).to_contain_text(args["reason"])
    page.shot("library-search")

    # A held card opens with its failing check; another is edited in place.
    page.page.click(f"button[data-open='{args['suspended']}']")
    view = page.page.locator(f"[data-card-view='{args['suspended']}']")
    expect(view.locator(".checks li.bad").first).to_contain_text(args["reason"])
    page.page.locator("dialog.card-dialog button.close").click()
    page.page.fill("#card-query", "")
    page.page.click("form[role='search'] button[type='submit']")
    edited = args["edit"]
    page.page.click(f"button[data-open='{edited}']")
    view = page.page.locator(f"[data-card-view='{edited}']")
    expect(view.locator(".card-body")).to_contain_text("Body.")
    view.locator("[data-act='edit']").click()
    page.page.fill("#edit-title", "Edited in the browser")
    page.page.fill("#edit-body", "A body the owner wrote.")
    page.shot("library-edit")
    view.locator("form.card-edit button[type='submit']").click()
    expect(view.locator("[data-revision]")).to_have_text("2")
    expect(page.page.locator("#card-dialog-title")).to_have_text("Edited in the browser")
    expect(view.locator(".card-history tr[data-history='revise']")).to_have_count(1)
    history_by = view.locator(".card-history tr[data-history='revise'] td").nth(2).inner_text()
    # Changed behind the dialog's back: the next save is refused as stale, sent once.
    current = owner_call(origin, args["token"], "cards.inspect", {"id": edited})["card"]
    changed = {k: current[k] for k in ("kind", "title", "summary", "appliesTo", "tags", "related")}
    changed["body"] = "Changed elsewhere."
    owner_call(origin, args["token"], "cards.edit", {"id": edited, "revision": current["revision"],
               "contentHash": current["contentHash"], "card": changed, "idempotencyKey": "elsewhere-1"})
    view.locator("[data-act='edit']").click()
    page.page.fill("#edit-body", "A second edit from a stale page.")
    view.locator("form.card-edit button[type='submit']").click()
    stale = view.locator(".outcome.error")
    expect(stale).to_have_attribute("data-code", "stale_card")
    stale_code = stale.get_attribute("data-code")
    # A retry would follow the failure at once; give it a moment to show itself.
    page.page.wait_for_timeout(1000)
    page.shot("library-stale")
    page.page.locator("dialog.card-dialog button.close").click()
    expect(page.page.locator(f"article[data-card='{edited}'] h2")).to_contain_text("Edited in the browser")

    archived_id = args["archive"]
    page.page.click(f"button[data-open='{archived_id}']")
    view = page.page.locator(f"[data-card-view='{archived_id}']")
    view.locator("[data-act='archive']").click()
    view.locator("[data-act='archive-confirm']").click()
    expect(view.locator("[data-state='archived']")).to_have_count(1)
    expect(view.locator("[data-act='edit']")).to_have_count(0)
    page.page.locator("dialog.card-dialog button.close").click()
    expect(page.page.locator(f"article[data-card='{archived_id}']")).to_have_attribute("data-state", "archived")
    page.shot("library-archived")
    # The refused save's 409 is the browser's own resource error; anything else is the page's.
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "reason": reason, "ruleCount": shown_rule,
            "listCalls": len(page.pipeline_calls("cards.list")), "editCalls": len(page.pipeline_calls("cards.edit")),
            "archiveCalls": len(page.pipeline_calls("cards.archive")), "staleCode": stale_code,
            "historyBy": history_by}


def order(browser, origin, shots, args):
    """Drag a card onto another, move one later from its menu, reload, then reset the order."""
    page = Page(browser, origin, shots)
    page.open("tools")
    board = page.page.locator("#tools-board")
    first, second, third = args["ids"]

    def shown():
        return board.locator("article.item").evaluate_all("cards => cards.map(c => c.dataset.id)")

    def expect_order(ids):
        expect(board.locator("article.item")).to_have_count(len(ids))
        for at, item in enumerate(ids):
            expect(board.locator("article.item").nth(at)).to_have_attribute("data-id", item)

    expect_order([first, second, third])
    board.locator(f"article.item[data-id='{third}']").drag_to(board.locator(f"article.item[data-id='{first}']"))
    expect_order([third, first, second])
    after_drag = shown()
    # Opened while the drag's save is still being answered: the menu stays open through
    # the re-render that follows.
    card = board.locator(f"article.item[data-id='{first}']")
    card.locator("details.menu summary").click()
    card.locator("details.menu button", has_text="Move later").click()
    expect_order([third, second, first])
    expect(page.page.locator(".outcome").first).to_contain_text("Saved")
    page.page.reload()
    page.ready()
    board = page.page.locator("#tools-board")
    expect_order([third, second, first])
    after_reload = shown()
    page.shot("order-moved")
    page.page.click("button.reset-order")
    expect_order([first, second, third])
    return {"errors": page.errors, "afterDrag": after_drag, "afterReload": after_reload, "afterReset": shown()}


def held(browser, origin, shots, args):
    """The MCP tools the quarantine holds, in the review queue: a changed one shows a diff
    against what was approved; a new one, with markup in its description, is shown as text
    and approved with one click."""
    page = Page(browser, origin, shots)
    page.open("review")
    changed = page.page.locator(f"[data-tool='{args['changed']}']")
    expect(changed).to_be_visible()
    removed = changed.locator("pre.diffview del").count()
    added = changed.locator("pre.diffview ins").count()
    fresh = page.page.locator(f"[data-tool='{args['new']}']")
    expect(fresh).to_be_visible()
    images = fresh.locator("img").count()
    summary = fresh.locator(".summary").inner_text()
    page.shot("held-tools")
    fresh.locator("button[data-act='approve-tool']").click()
    expect(fresh.locator(".outcome.ok")).to_be_visible()
    # The approved card stays with its outcome while the view refreshes (the approval
    # changes the hub's lists, which the event stream announces).
    page.page.wait_for_timeout(1500)
    expect(fresh.locator(".outcome.ok")).to_be_visible()
    expect(fresh.locator("button[data-act='approve-tool']")).to_be_disabled()
    page.shot("held-approved")
    # This instance has no card faculty: its queue answers 404, which the view shows.
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "removed": removed, "added": added, "images": images, "summary": summary}


def held_all(browser, origin, shots, args):
    """Everything a provider holds, approved with one click on its group, which lists it."""
    page = Page(browser, origin, shots)
    page.open("review")
    card = page.page.locator(f"[data-tool='{args['card']}']")
    expect(card).to_be_visible()
    kind = card.get_attribute("data-kind")
    group = page.page.locator(f"[data-held-provider='{args['provider']}']")
    expect(group.locator(f"[data-approves='{args['card']}']")).to_be_visible()
    group.locator("button[data-act='approve-provider']").click()
    expect(group.locator(".outcome.ok").first).to_be_visible()
    page.shot("held-approved-all")
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "kind": kind}


def providers(browser, origin, shots, args):
    """An MCP provider started from the MCP view, its state updated live there, its log
    shown, and stopped again."""
    page = Page(browser, origin, shots)
    page.open("mcp")
    row = lambda: page.page.locator(f"tr[data-provider='{args['id']}']")
    # Running (the test started it): stopped on request, then started from here.
    expect(row().locator(".badge")).to_have_text("ready")
    row().locator("button[data-act='stop']").click()
    expect(row().locator(".badge")).to_have_text("stopped")
    row().locator("button[data-act='start']").click()
    # Drawn again when the events say the provider's state changed.
    expect(row().locator(".badge")).to_have_text("ready")
    row().locator("button[data-act='logs']").click()
    log = page.page.locator("dialog.logview pre.log")
    expect(log).to_contain_text("started:")
    page.shot("provider-log")
    page.page.locator("dialog.logview button.close").click()
    row().locator("button[data-act='stop']").click()
    expect(row().locator(".badge")).to_have_text("stopped")
    page.shot("provider-stopped")
    return {"errors": page.errors}


def connect(browser, origin, shots, args):
    """A remote server that needs a login is connected from the MCP view — its login page
    opened from the link the Connect button shows, the authorization server sending the
    browser back to the host's callback — then logged out of again."""
    page = Page(browser, origin, shots)
    failed = []
    page.page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.request.method} {r.url} {r.status}"))
    # The review queue asks for the login too, and leads to the MCP view.
    page.open("review")
    expect(page.page.locator(f"[data-login-needed='{args['id']}']")).to_be_visible()
    page.page.locator(f"[data-login-needed='{args['id']}'] a").click()
    row = lambda: page.page.locator(f"tr[data-provider='{args['id']}']")
    expect(row().locator("[data-login='needed']")).to_be_visible()
    row().locator("button[data-act='connect']").click()
    link = row().locator("a[data-login-url]")
    expect(link).to_be_visible()
    page.shot("login-link")
    tab = page.page.context.new_page()
    tab.goto(link.get_attribute("href"))
    expect(tab.locator("h1")).to_have_text("Logged in")
    callback = tab.url
    tab.close()
    # The view is drawn again once the server reconnected with its token.
    expect(row().locator("[data-login='signed-in']")).to_be_visible()
    page.shot("connected")
    row().locator("button[data-act='disconnect']").click()
    expect(row().locator("[data-login='needed']")).to_be_visible()
    return {"errors": page.errors, "failed": failed, "callback": callback.split("?")[0]}


def mcp_calls(origin, token, calls):
    """Calls tools through the hub's main endpoint, in one legacy session: `calls` is a list
    of [tool, arguments]; the JSON-RPC answers."""
    def post(body, session=None):
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "authorization": f"Bearer {token}"}
        if session:
            headers["mcp-session-id"] = session
        request = urllib.request.Request(f"{origin}/myspace-butler/api/mcp", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        with urllib.request.urlopen(request) as response:
            text = response.read()
            return response.headers.get("mcp-session-id"), json.loads(text) if text else None

    session, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "drive", "version": "1"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return [post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
                 session)[1] for i, (name, arguments) in enumerate(calls, 1)]


def activity(browser, origin, shots, args):
    """The MCP activity log: newest first, paged back with "older", filtered by outcome, name
    glob, method and endpoint; a bad glob is shown; new calls appear live under the filter."""
    page = Page(browser, origin, shots)
    page.open("mcp/activity")
    rows = page.page.locator("#activity-rows tr")

    def shown():
        return rows.evaluate_all(
            "rows => rows.map(r => ({seq: Number(r.dataset.seq), name: r.dataset.name, outcome: r.dataset.outcome,"
            " method: r.dataset.method}))")

    expect(page.page.locator("nav.tabs a[data-tab='activity']")).to_have_attribute("aria-current", "page")
    expect(rows).to_have_count(min(args["total"], args["page"]))
    first_page = rows.count()
    older = page.page.locator("#activity-older")
    expect(older).to_be_visible()
    older.click()
    expect(rows).to_have_count(args["total"])
    expect(older).to_be_hidden()
    everything = shown()
    page.shot("activity-all")

    page.page.select_option("#activity-outcome", "error")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-name", args["missing"])
    errors = shown()
    # New calls while the filter is on, without a reload: the error shows, the ok one does not.
    page.page.evaluate("window.__stayed = true")
    answers = mcp_calls(origin, args["token"], [[args["echo"], {"text": "live"}], [args["live"], {}]])
    expect(rows.first).to_have_attribute("data-name", args["live"])
    expect(rows).to_have_count(2)
    live = shown()
    stayed = page.page.evaluate("window.__stayed === true")
    page.shot("activity-live")

    # A name glob, with the outcome filter cleared.
    page.page.select_option("#activity-outcome", "")
    page.page.fill("#activity-name", f"{args['echo'][:-2]}*")
    page.page.press("#activity-name", "Enter")
    expect(rows).to_have_count(2)
    expect(page.page.locator(f"#activity-rows tr:not([data-name='{args['echo']}'])")).to_have_count(0)
    glob = shown()
    # Method and endpoint, exactly.
    page.page.fill("#activity-name", "")
    page.page.fill("#activity-method", "tools/call")
    page.page.fill("#activity-endpoint", "main")
    page.page.click("#activity-filters button[type='submit']")
    expect(rows).to_have_count(4)
    calls = shown()
    page.page.fill("#activity-endpoint", "butler")
    page.page.press("#activity-endpoint", "Enter")
    expect(rows).to_have_count(0)
    expect(page.page.locator("#activity-empty")).to_be_visible()
    # A name that is no glob: the host's refusal is shown, nothing else.
    page.page.click("#activity-clear")
    expect(rows).to_have_count(min(args["total"] + 2, args["page"]))
    page.page.fill("#activity-name", "[")
    page.page.press("#activity-name", "Enter")
    expect(page.page.locator("#activity-error")).to_contain_text("invalid_query")
    expect(rows).to_have_count(0)
    page.shot("activity-refused")
    followed = any(method == "GET" and "/mcp/activity?" in url and "after=" in url for method, url, _ in page.requests)
    # The refused glob's 400 is the page's to show, not an error of its own.
    errors_logged = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors_logged, "firstPage": first_page, "all": everything, "errorRows": errors,
            "liveRows": live, "globRows": glob, "callRows": calls, "stayed": stayed, "followed": followed,
            "answers": answers}


def packages(browser, origin, shots, args):
    """A capability package imported from the Packages view: a broken one is refused with
    each problem shown, a good one is listed as not enabled and enabled with one click."""
    page = Page(browser, origin, shots)
    page.open("packages")
    form = page.page.locator("#import-form")
    form.locator("#import-path").fill(args["broken"])
    form.locator("button[data-act='import']").click()
    expect(form.locator(".outcome.error")).to_be_visible()
    refused = form.locator(".outcome").inner_text()
    code = form.locator(".outcome").get_attribute("data-code")
    page.shot("packages-refused")
    form.locator("#import-path").fill(args["good"])
    form.locator("button[data-act='import']").click()
    # Read in the page as soon as it shows: 1.5 s later the view redraws with an empty form.
    imported = page.page.wait_for_function(
        "() => document.querySelector('#import-form .outcome.ok')?.innerText").json_value()
    row = page.page.locator(f"tr[data-package='{args['id']}']")
    expect(row).to_be_visible()
    before = row.locator(".badge").inner_text()
    row.locator("button[data-act='enable']").click()
    expect(page.page.locator(f"tr[data-package='{args['id']}'] button[data-act='disable']")).to_be_visible()
    after = page.page.locator(f"tr[data-package='{args['id']}'] .badge").inner_text()
    page.shot("packages-enabled")
    return {"errors": [e for e in page.errors if not e.startswith("Failed to load resource")], "refused": refused,
            "code": code, "imported": imported, "before": before, "after": after}


def plugins(browser, origin, shots, args):
    """The ChatOS plugins on the Packages view: each app's server, prompts and profile, the
    plugin's problems, its backend's state, and a refused plugin with its reason."""
    page = Page(browser, origin, shots)
    page.open("packages")
    card = page.page.locator(f"[data-plugin='{args['id']}']")
    expect(card).to_be_visible()
    apps = {}
    for row in card.locator("tr[data-app]").all():
        cells = row.locator("td").all()
        apps[row.get_attribute("data-app")] = [c.inner_text() for c in cells]
    refused = page.page.locator("[data-plugin-refused]").all_inner_texts()
    page.shot("plugins")
    return {"errors": page.errors, "apps": apps, "problems": card.locator(".problems li").all_inner_texts(),
            "backend": card.locator(".badge").all_inner_texts(), "title": card.locator("h3").inner_text(),
            "refused": refused}


def confirmations(browser, origin, shots, args):
    """Two delegations' results awaiting the owner, beside the cards: one confirmed, one
    rejected with a reason; each card keeps its outcome; the proposed result is text."""
    page = Page(browser, origin, shots)
    page.open("review")
    first, second = (page.page.locator(f"article[data-run='{run}']") for run in args["runs"])
    expect(first).to_be_visible()
    expect(second).to_be_visible()
    shown = first.locator("pre.result").inner_text()
    images = page.page.locator("#confirmations img").count()
    empty_shown = page.page.locator("main .empty").is_visible()
    proposed = first.locator("[data-proposed]").inner_text()
    local = page.page.evaluate(
        "(at) => new Date(at).toLocaleString()", first.locator("[data-proposed] time").get_attribute("datetime"))
    badge = page.page.locator("nav a[data-view='review'] .count").inner_text()
    page.shot("confirmations")
    first.locator("button[data-act='confirm-run']").click()
    expect(first.locator(".outcome.ok")).to_be_visible()
    second.locator("input.reason").fill("too early")
    second.locator("button[data-act='reject-run']").click()
    expect(second.locator(".outcome.ok")).to_be_visible()
    page.page.wait_for_timeout(1500)
    expect(first.locator("button[data-act='confirm-run']")).to_be_disabled()
    page.shot("confirmations-decided")
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "shown": shown, "images": images, "emptyShown": empty_shown, "proposed": proposed,
            "local": local, "badge": badge}


def automations(browser, origin, shots, args):
    """The Butler view registers the host's automations and lists them with their next run."""
    page = Page(browser, origin, shots)
    page.open("butler")
    section = page.page.locator("#automations")
    expect(section.locator(".empty")).to_be_visible()
    section.locator("button[data-act='register-automations']").click()
    # Read in the page as soon as it shows: a change the host announces redraws the view.
    outcome = page.page.wait_for_function(
        "() => document.querySelector('#automations .outcome.ok')?.innerText").json_value()
    row = section.locator(f"tr[data-job='{args['title']}']")
    expect(row).to_be_visible()
    cells = row.locator("td").all_inner_texts()
    page.shot("automations")
    return {"errors": page.errors, "outcome": outcome, "cells": cells}


def sessions(browser, origin, shots, args):
    """The Butler view lists the open console sessions, this one marked; "End" ends another
    browser's, and "Log out" this one's."""
    page = Page(browser, origin, shots)
    other = Page(browser, origin, shots)
    page.open("butler")
    rows = page.page.locator("#sessions tr[data-session]")
    expect(rows).to_have_count(2)
    current = page.page.locator("#sessions tr[data-current='true']")
    expect(current).to_have_count(1)
    marked = current.locator("[data-this-session]").inner_text()
    agent = current.locator("td").first.inner_text()
    page.shot("sessions")
    page.page.locator("#sessions tr:not([data-current='true']) button[data-act='end-session']").click()
    expect(rows).to_have_count(1)
    expect(current).to_have_count(1)
    # The other browser's session is over: its proof and cookie are refused.
    other.open("butler")
    refused = other.page.locator("#sessions [data-sessions='failed']").inner_text()
    # Log out: this session ends, the page forgets its proof and says how to log in again.
    logout = page.page.locator("#logout")
    expect(logout).to_be_visible()
    logout.click()
    logged_out = page.page.locator("p[data-logged-out]").inner_text()
    expect(logout).to_be_hidden()
    proof_after = page.page.evaluate("localStorage.getItem('butler.proof')")
    page.shot("logged-out")
    page.page.reload()
    page.ready()
    after_reload = page.page.locator("#sessions [data-sessions='login']").inner_text()
    return {"errors": page.errors, "marked": marked, "agent": agent, "refused": refused, "loggedOut": logged_out,
            "proofAfter": proof_after, "afterReload": after_reload}


# Where the view's heading is, and whether anything covers it: its box, and the element
# found at points along its text (the heading itself unless something lies on top).
HEADING_SEEN = """() => {
    const h1 = document.querySelector('main h1');
    if (!h1) return { found: false };
    const box = h1.getBoundingClientRect();
    const y = box.top + Math.min(box.height / 2, 10);
    const xs = [box.left + 2, box.left + Math.min(box.width, 60) / 2];
    const covered = xs.map((x) => document.elementFromPoint(x, y))
        .filter((el) => !el || !h1.contains(el)).map((el) => (el ? el.tagName + '.' + el.className : 'nothing'));
    return { found: true, top: box.top, bottom: box.bottom, inView: box.top >= 0 && box.bottom <= innerHeight,
             covered, scrollY: window.scrollY };
}"""

# What scrolls sideways: the page itself, or any element in it that has more to show to its right.
SIDEWAYS = """() => {
    const wide = [...document.querySelectorAll('main *')].filter((el) => {
        const overflow = getComputedStyle(el).overflowX;
        return (overflow === 'auto' || overflow === 'scroll') && el.scrollWidth > el.clientWidth + 1;
    }).map((el) => `${el.tagName}.${el.className} ${el.scrollWidth}>${el.clientWidth}`);
    return { page: document.documentElement.scrollWidth > innerWidth, elements: wide };
}"""


def headings(browser, origin, shots, args):
    """Every view opens with its heading in sight, whether opened by its address or from the
    navigation after scrolling down another view: at 1280 and 360 px, light and dark, English
    and Chinese. On #/mcp at 360 px nothing scrolls sideways."""
    views = args["views"]
    seen = []
    sideways = {}
    header = {}
    errors = []
    for viewport in ((1280, 800), (360, 740)):
        for scheme in ("light", "dark"):
            for locale in ("en-US", "zh-CN"):
                page = Page(browser, origin, shots, viewport=viewport, locale=locale, scheme=scheme)
                where = f"{viewport[0]}-{scheme}-{locale}"
                for view in views:
                    page.open(view)
                    seen.append({"at": where, "how": "address", "view": view, **page.page.evaluate(HEADING_SEEN)})
                for view in views:
                    # Scrolled to the bottom of a long view first (another, for the long
                    # view itself), then the tab clicked.
                    page.open(args["long"] if view != args["long"] else args["other"])
                    page.page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
                    page.page.locator(f"nav a[data-view='{view.split('/')[0]}']").click()
                    page.page.wait_for_function(f"() => document.body.dataset.view === '{view.split('/')[0]}'")
                    page.ready()
                    seen.append({"at": where, "how": "nav", "view": view, **page.page.evaluate(HEADING_SEEN)})
                    if scheme == "light" and locale == "en-US":
                        page.shot(f"heading-{view.replace('/', '-')}-{viewport[0]}")
                page.open("mcp")
                expect(page.page.locator(f"tr[data-provider='{args['provider']}']")).to_be_visible()
                sideways[where] = page.page.evaluate(SIDEWAYS)
                header[where] = page.page.evaluate("document.querySelector('header.top').offsetHeight")
                if scheme == "dark" and locale == "zh-CN":
                    page.shot(f"mcp-{viewport[0]}-dark-zh")
                errors += page.errors
                page.context.close()
    return {"errors": errors, "seen": seen, "sideways": sideways, "header": header}


def waiting(browser, origin, shots, args):
    """The Review tab counts what the MCP quarantine holds, from another view and in the
    review view; a provider's held items are approved at once, the list of what that
    approves shown beside the button."""
    page = Page(browser, origin, shots)
    page.open("tools")
    badge = page.page.locator("nav a[data-view='review'] .count")
    expect(badge).to_have_text(str(args["held"]))
    from_tools = badge.inner_text()
    page.page.locator("nav a[data-view='review']").click()
    page.ready()
    group = page.page.locator(f"[data-held-provider='{args['provider']}']")
    expect(group).to_be_visible()
    expect(badge).to_have_text(str(args["held"]))
    title_count = page.page.locator("main h1 .count").inner_text()
    empty_shown = page.page.locator("main .empty").is_visible()
    listed = group.locator("[data-approves]").evaluate_all("items => items.map((i) => i.dataset.approves)")
    button = group.locator("button[data-act='approve-provider']").inner_text()
    page.shot("held-provider")
    group.locator("button[data-act='approve-provider']").click()
    expect(group.locator(".outcome.ok").first).to_be_visible()
    # Nothing is held any more: the badge goes, and the view says nothing awaits.
    expect(badge).to_have_count(0)
    expect(page.page.locator("main .empty")).to_be_visible()
    page.shot("held-provider-approved")
    approvals = [json.loads(body) for method, url, body in page.requests
                 if method == "POST" and url.endswith("/mcp/quarantine/approve") and body]
    errors = [e for e in page.errors if not e.startswith("Failed to load resource")]
    return {"errors": errors, "fromTools": from_tools, "titleCount": title_count, "emptyShown": empty_shown,
            "listed": listed, "button": button, "approvals": approvals}


def quiet(browser, origin, shots, args):
    """How often a page on another view reads the quarantine (which starts providers not yet
    listed) while a provider keeps failing to start and announcing it."""
    page = Page(browser, origin, shots)
    page.open("tools")
    page.page.wait_for_timeout(args["seconds"] * 1000)
    reads = [url for method, url, _ in page.requests if method == "GET" and url.endswith("/mcp/quarantine")]
    return {"errors": page.errors, "reads": len(reads)}


def language(browser, origin, shots, args):
    """State badges, headings and the host's automation title follow the console's language."""
    found = {}
    for locale in ("zh-CN", "en-US"):
        page = Page(browser, origin, shots, locale=locale)
        texts = {}
        page.open("tools")
        expect(page.page.locator(f"article.item[data-id='{args['mcp']}'] .badge.state")).to_be_visible()
        texts["tools"] = page.page.locator("#tools-board .badge.state").all_inner_texts()
        texts["mcpItem"] = page.page.locator(f"article.item[data-id='{args['mcp']}'] .badge.state").inner_text()
        page.open("mcp")
        texts["providers"] = page.page.locator("tr[data-provider] .badge").all_inner_texts()
        texts["headings"] = page.page.locator("main h2").all_inner_texts()
        page.open("butler")
        expect(page.page.locator("[data-report] .status-report").first).to_be_visible()
        texts["faculties"] = page.page.locator("article.faculty .badge.state").all_inner_texts()
        texts["reports"] = page.page.locator(".status-report .badge").all_inner_texts()
        texts["jobs"] = page.page.locator("#automations tr[data-job] td[data-title]").all_inner_texts()
        page.shot(f"butler-{locale}")
        found[locale] = {**texts, "errors": page.errors}
        page.context.close()
    return {"errors": found["zh-CN"]["errors"] + found["en-US"]["errors"], "zh": found["zh-CN"], "en": found["en-US"]}


def spent_link(browser, origin, shots, args):
    """A login link opened a second time: a page saying so and how to get a new one."""
    said = {}
    errors = []
    for locale in ("en-US", "zh-CN"):
        page = Page(browser, origin, shots, locale=locale)
        token = os.environ["BUTLER_OWNER_TOKEN"]
        request = urllib.request.Request(
            f"{origin}/myspace-butler/api/console/links", data=b"{}",
            headers={"content-type": "application/json", "authorization": f"Bearer {token}"}, method="POST")
        with urllib.request.urlopen(request) as response:
            url = json.loads(response.read())["data"]["url"]
        page.page.goto(url)
        page.page.wait_for_url(f"{origin}/myspace-butler/**")
        answer = page.page.goto(url)
        said[locale] = {
            "status": answer.status,
            "type": page.page.evaluate("document.contentType"),
            "heading": page.page.locator("h1").inner_text(),
            "text": page.page.locator("body").inner_text(),
            "console": page.page.locator("a[href='/myspace-butler/']").count(),
        }
        page.shot(f"spent-link-{locale}")
        # The refused link's 403 is the browser's own resource error; anything else is the page's.
        errors += [e for e in page.errors if not e.startswith("Failed to load resource")]
        page.context.close()
    return {"errors": errors, **said}


def settings(browser, origin, shots, args):
    """The root config edited in the Settings view: an invalid edit shows each problem with
    its pointer and cannot be saved, broken JSON says so, a valid edit is saved and in force."""
    page = Page(browser, origin, shots)
    page.open("settings")
    editor = page.page.locator("#config-editor")
    save = page.page.locator("button[data-action='save-config']")
    expect(page.page.locator("#config-verdict .ok")).to_be_visible()
    original = json.loads(editor.input_value())

    def typed(document):
        editor.fill(json.dumps(document, indent=2) if not isinstance(document, str) else document)

    invalid = json.loads(json.dumps(original))
    invalid.setdefault("mcp", {})["idleSec"] = "soon"
    invalid["mcp"]["quarantine"] = "no"
    typed(invalid)
    expect(page.page.locator("#config-verdict .sev-error")).to_be_visible()
    problems = page.page.locator("#config-verdict .problems li code").all_inner_texts()
    invalid_disabled = save.is_disabled()
    page.shot("settings-invalid")
    typed('{ "mcp": ')
    expect(page.page.locator("#config-verdict")).to_contain_text("not JSON")
    broken_disabled = save.is_disabled()
    valid = json.loads(json.dumps(original))
    valid.setdefault("mcp", {})["quarantine"] = False
    valid["stateDir"] = ".moved"
    typed(valid)
    expect(page.page.locator("#config-verdict .ok")).to_be_visible()
    waiting = page.page.locator("#config-verdict .waiting code").all_inner_texts()
    expect(save).to_be_enabled()
    save.click()
    expect(page.page.locator("#config-status")).to_have_text(re.compile("Saved"))
    page.shot("settings-saved")
    return {"errors": page.errors, "problems": problems, "invalidDisabled": invalid_disabled,
            "brokenDisabled": broken_disabled, "waiting": waiting}


SCENARIOS = {f.__name__: f for f in (smoke, review, supervise, layout, panel, xss, library, order, held, held_all, providers,
                                     activity, packages, plugins, confirmations, automations, sessions, headings,
                                     waiting, quiet, language, spent_link, settings, connect)}


def main():
    scenario, origin, shots = sys.argv[1:4]
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with sync_playwright() as p:
        browser = launch(p)
        try:
            result = SCENARIOS[scenario](browser, origin, shots, args)
        finally:
            browser.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
