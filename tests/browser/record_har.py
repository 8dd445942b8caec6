"""Records a session of volley serve's /app page as HAR, in Debian's
chromium under Playwright (record_har_path): the page, then its second step
(/app?step=2) in a new tab, each until its script has made all its calls.
(Playwright's HAR has a page per tab, not per navigation as devtools'.)

Usage: record_har.py BASE_URL OUT.har
Prints a JSON line with the pages' logs (what the page's script saw)."""

import json
import sys

from playwright.sync_api import sync_playwright

from common import CHROMIUM, check, run


def main():
    base, har = sys.argv[1], sys.argv[2]
    logs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-background-networking", "--disable-component-update"],
        )
        try:
            context = browser.new_context(record_har_path=har)
            errors = []
            for path in ["/app", "/app?step=2"]:
                page = context.new_page()
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(base + path)
                page.wait_for_selector("body[data-done=yes]", timeout=20000)
                log = page.inner_text("#log")
                check("failed" not in log, f"the page's script failed on {path}: {log}")
                logs.append(log)
            check(not errors, f"page errors: {errors}")
            # Closing the context writes the HAR file.
            context.close()
        finally:
            browser.close()
    print(json.dumps({"logs": logs}))


run(main)
