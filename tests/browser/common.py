"""What the browser checks share: Debian's chromium under Playwright, and a
page that records its console errors so a check can fail on them."""

import contextlib
import os
import sys

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("VOLLEY_CHROMIUM", "/usr/bin/chromium")

# The chart geometry of src/report/page/chart.js: the SVG's width and the
# plot's left and right padding, to turn a value into a pixel.
WIDTH, PAD_LEFT, PAD_RIGHT = 860, 64, 16


class Failed(Exception):
    """A check did not hold; the message says which and what was seen."""


def check(condition, message):
    if not condition:
        raise Failed(message)


@contextlib.contextmanager
def browser_page():
    """A page in headless chromium; `page.errors` collects console errors."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 960, "height": 1100})
            page.errors = []
            page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: page.errors.append(str(e)))
            yield page
        finally:
            browser.close()


def x_pixel(page, figure, x):
    """The page coordinate of value x on a chart's (linear) time axis."""
    figure.scroll_into_view_if_needed()
    box = figure.locator("svg").bounding_box()
    x0 = float(figure.get_attribute("data-x0"))
    x1 = float(figure.get_attribute("data-x1"))
    inner = PAD_LEFT + (x - x0) / (x1 - x0) * (WIDTH - PAD_LEFT - PAD_RIGHT)
    return box["x"] + inner * box["width"] / WIDTH, box["y"] + box["height"] / 2


def number(text):
    return float(text.replace(",", "").split()[0])


def no_json_in(page):
    text = page.inner_text("body")
    for fragment in ('{"', '["', '":'):
        check(fragment not in text, f"the page shows a JSON fragment ({fragment!r})")


def run(main):
    """Runs a check; a failed one prints why and exits 1."""
    try:
        main()
    except Failed as failure:
        print(f"browser check failed: {failure}", file=sys.stderr)
        sys.exit(1)
