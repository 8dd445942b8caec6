"""Opens volley's live dashboard mid-run and follows it to the end: the
request count grows between two reads, the page ends on the final report
with no console errors, and volley's server goes away although the tab is
still open.

With SHARDS, the page is a live merge's (`volley merge --follow`): it also
shows that many shards, all running, and the final report is the merged one.

usage: check_dashboard.py URL SCREENSHOT.png [SHARDS]
Prints {"final_requests": N} for the caller to compare with the JSON report;
exits non-zero on a failed check."""

import json
import sys
import time
import urllib.request

from common import browser_page, check, no_json_in, run


def requests_shown(page):
    page.wait_for_selector('[data-tile="requests"]', timeout=10000)
    return int(float(page.get_attribute('[data-tile="requests"]', "data-value")))


def server_gone(url, within_s):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
        except OSError:
            return True
        time.sleep(0.2)
    return False


def live_shards(page, shards):
    """A live merge's block: every shard there and running (or finished)."""
    block = page.wait_for_selector("#live-shards", timeout=10000)
    check(int(block.get_attribute("data-shards")) == shards,
          f"the page shows {block.get_attribute('data-shards')} shards, not {shards}")
    check(int(block.get_attribute("data-reporting")) == shards,
          f"not every shard is running: {page.inner_text('#live-shards')!r}")
    states = page.eval_on_selector_all("table.shards-live tr td:nth-child(2)", "cells => cells.map(c => c.textContent)")
    check(len(states) == shards and all(s in ("running", "finished") for s in states), f"shard states: {states}")


def main():
    url, screenshot = sys.argv[1:3]
    shards = int(sys.argv[3]) if len(sys.argv) > 3 else None
    with browser_page() as page:
        page.goto(url)
        page.wait_for_function("document.querySelectorAll('figure.chart').length > 0", timeout=10000)
        first = requests_shown(page)
        # Opened mid-run, the page drew the intervals before it from history.
        check(int(page.get_attribute('figure[data-chart="latency-0"]', "data-points")) >= 2,
              "a page opened mid-run did not get the history first")
        check(page.get_attribute("#progress", "data-state") == "running", "the page does not show the run in progress")
        progress = page.inner_text("#progress")
        check(" of " in progress, f"the progress does not say elapsed of planned: {progress!r}")
        if shards:
            live_shards(page, shards)
        time.sleep(1.5)
        second = requests_shown(page)
        check(page.get_attribute("#progress", "data-state") == "running", "the run ended before the second read: make it longer")
        check(second > first > 0, f"the request count did not grow mid-run: {first} then {second}")
        check(int(page.get_attribute('figure[data-chart="latency-0"]', "data-points")) >= 2,
              "the live latency chart drew nothing")
        page.screenshot(path=screenshot, full_page=False)
        page.wait_for_selector('#progress[data-state="finished"]', timeout=60000)
        final = requests_shown(page)
        check(page.get_attribute("body", "data-charts-ok") == "true", "a chart of the final report drew nothing")
        if shards:
            text = page.inner_text("section.shards")
            check(f"Merged from {shards} of {shards} shards" in text, f"the final report is not the merged one: {text!r}")
        no_json_in(page)
        check(not page.errors, f"console errors: {page.errors}")
        # The tab stays open: volley must still go away.
        check(server_gone(url, 10), "the dashboard still answers 10 s after the run ended")
        print(json.dumps({"first": first, "second": second, "final_requests": final}))


if __name__ == "__main__":
    run(main)
