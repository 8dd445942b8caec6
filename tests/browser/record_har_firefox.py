"""Has Firefox (Debian's firefox-esr, headless) write HAR files of volley
serve's /app page and its second step (/app?step=2) with its own devtools:
the toolbox, opened with the window (-devtools), exports each page load to
a file once the page's requests are done (the network monitor's automatic
HAR export, turned on in a throwaway profile). The browser is driven over
its WebDriver BiDi server; requests to anything but loopback go to a proxy
that is not there, so none leaves the machine.

Usage: record_har_firefox.py BASE_URL OUT_DIR
Prints a JSON line: the HAR files Firefox wrote, one a page, in the order
the pages were loaded, and the pages' logs (what the page's script saw)."""

import json
import os
import sys
import tempfile

from common import FIREFOX, Failed, Remote, browser_process, check, run, wait_for

PATHS = ["/app", "/app?step=2"]

PREFS = {
    "devtools.netmonitor.har.enableAutoExportToFile": True,
    "devtools.netmonitor.har.defaultFileName": "page",
    # Anything not on loopback (which is never proxied) goes to the discard
    # port, where nothing answers; so no name is looked up for it either.
    # No prefetching of names, no DNS over HTTPS.
    "network.proxy.type": 1,
    "network.proxy.http": "127.0.0.1",
    "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1",
    "network.proxy.ssl_port": 9,
    "network.dns.disablePrefetch": True,
    "network.trr.mode": 5,
}


def user_js(prefs):
    return "".join(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n" for name, value in prefs.items())


def bidi_address(profile):
    """Where Firefox's WebDriver BiDi server listens, once it has written it."""
    try:
        with open(os.path.join(profile, "WebDriverBiDiServer.json")) as f:
            server = json.load(f)
        return f"ws://{server['ws_host']}:{server['ws_port']}/session"
    except (OSError, ValueError, KeyError):
        return None


class Exports:
    """The HAR files in the export folder, each taken once it is complete."""

    def __init__(self, folder):
        self.folder = folder
        self.taken = set()

    def next(self):
        for name in sorted(os.listdir(self.folder)):
            path = os.path.join(self.folder, name)
            if path in self.taken:
                continue
            try:
                with open(path) as f:
                    har = json.load(f)
            except ValueError:
                # Still being written.
                continue
            self.taken.add(path)
            return path, har
        return None

    def forget(self, path):
        """Removes a file taken (its name may then be written again)."""
        os.remove(path)
        self.taken.discard(path)


def main():
    base, out = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    hars, logs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile")
        os.mkdir(profile)
        with open(os.path.join(profile, "user.js"), "w") as f:
            f.write(user_js({**PREFS, "devtools.netmonitor.har.defaultLogDir": out}))
        args = [FIREFOX, "--headless", "--no-remote", "--profile", profile, "-devtools"]
        args += ["--remote-debugging-port", "0", "about:blank"]
        with browser_process(args, os.path.join(tmp, "firefox.log")):
            bidi = Remote(wait_for("Firefox's WebDriver BiDi server", lambda: bidi_address(profile), 60))
            bidi("session.new", {"capabilities": {}})
            context = bidi("browsingContext.getTree", {})["contexts"][0]["context"]

            def load(url):
                bidi("browsingContext.navigate", {"context": context, "url": url, "wait": "complete"})

            def evaluate(expression):
                result = bidi(
                    "script.evaluate",
                    {"expression": expression, "target": {"context": context}, "awaitPromise": False},
                )
                check(result["type"] == "success", f"{expression}: {result}")
                return result["result"].get("value")

            # The toolbox exports only the page loads it saw begin, and it
            # opens along with the browser: until it has written the HAR of
            # a data: page (which sends nothing to the server), load another.
            exports = Exports(out)
            for attempt in range(3):
                load(f"data:text/html,<title>warm-up {attempt}</title>")
                try:
                    warm_up, _ = wait_for("the toolbox's export of a data: page", exports.next, 10)
                    exports.forget(warm_up)
                    break
                except Failed:
                    continue
            else:
                check(False, "Firefox's devtools exported no page load (did the toolbox open?)")

            for path in PATHS:
                load(base + path)
                wait_for(f"{path}'s script to finish", lambda: evaluate("document.body.dataset.done") == "yes")
                log = evaluate("document.getElementById('log').textContent")
                check("failed" not in log, f"the page's script failed on {path}: {log}")
                logs.append(log)
                file, har = wait_for(f"Firefox's HAR of {path}", exports.next)
                first = har["log"]["entries"][0]["request"]["url"]
                check(first == base + path, f"{file} starts with {first}, not the page {base + path}")
                hars.append(file)
            bidi("browser.close", {})
    print(json.dumps({"hars": hars, "logs": logs}))


run(main)
