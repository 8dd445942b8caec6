"""What the browser checks share: Debian's chromium under Playwright, and a
page that records its console errors so a check can fail on them; for the
scripts that drive a browser's own remote protocol instead (Firefox's
WebDriver BiDi, Chromium's DevTools protocol), the browser as a process of
its own and a client for its websocket."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from playwright.sync_api import sync_playwright
from websockets.sync.client import connect

CHROMIUM = os.environ.get("VOLLEY_CHROMIUM", "/usr/bin/chromium")
FIREFOX = os.environ.get("VOLLEY_FIREFOX", "/usr/bin/firefox-esr")

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


def wait_for(what, probe, timeout=20):
    """Polls probe() until it returns something true, which it returns;
    fails after timeout seconds, saying what it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        check(time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


@contextlib.contextmanager
def browser_process(args, log_path):
    """Runs a browser in a process group of its own, its output in log_path.
    After the caller closed it, the browser gets a few seconds to exit by
    itself; then (at once on a failure) the whole group is killed, so no
    browser process outlives the check. A failure carries the log's end."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    except Failed as failure:
        with open(log_path, "rb") as log:
            tail = log.read()[-3000:].decode(errors="replace")
        raise Failed(f"{failure}\n--- the browser's output ends:\n{tail}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class Remote:
    """A command client for a browser's remote protocol over a websocket.
    WebDriver BiDi and the DevTools protocol share the shape: a command is
    {id, method, params} (CDP adds sessionId for an attached target), its
    answer the message with the same id, holding result or error; events
    in between are skipped."""

    def __init__(self, url, timeout=20):
        self.socket = connect(url, max_size=None, open_timeout=timeout)
        self.timeout = timeout
        self.last_id = 0

    def __call__(self, method, params=None, session=None):
        self.last_id += 1
        command = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        self.socket.send(json.dumps(command))
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                message = json.loads(self.socket.recv(timeout=max(deadline - time.monotonic(), 0)))
            except TimeoutError:
                raise Failed(f"no answer to {method} in {self.timeout} s") from None
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise Failed(f"{method} failed: {message}")
                return message["result"]

    def close(self):
        self.socket.close()


def run(main):
    """Runs a check; a failed one prints why and exits 1."""
    try:
        main()
    except Failed as failure:
        print(f"browser check failed: {failure}", file=sys.stderr)
        sys.exit(1)
