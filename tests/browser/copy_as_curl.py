"""Has Chromium's own DevTools write "Copy all as cURL" (bash) for volley
serve's /app page and its second step (/app?step=2): Debian's chromium,
headless, opens DevTools with the tab (--auto-open-devtools-for-tabs); over
the DevTools protocol this script attaches to that DevTools window's page
(devtools://devtools/...), loads each page in the tab and, once its
requests are done, calls the network panel's copy action there, catching
what it hands to the clipboard. Requests to anything but loopback go to a
proxy that is not there.

Usage: copy_as_curl.py BASE_URL OUT.sh
Writes the two pages' copies to OUT.sh, one after the other (as pasted);
prints a JSON line with the pages' logs (what the page's script saw) and
the URLs DevTools had recorded for each."""

import json
import os
import sys
import tempfile

from common import CHROMIUM, Remote, browser_process, check, run, wait_for

PATHS = ["/app", "/app?step=2"]

# Runs in the DevTools window: true once DevTools has connected to the tab
# (its main module resolves readyForTest then).
READY = """(async () => {
  const Main = await import('./entrypoints/main/main.js');
  const main = Main.MainImpl.MainImpl.instanceForTest;
  if (!main) return false;
  await main.readyForTest();
  return true;
})()"""

# Loads a page in the tab through DevTools' own connection, so that its
# Network.enable, sent before, is in force for the whole load.
NAVIGATE = """(async (url) => {
  const SDK = await import('./core/sdk/sdk.js');
  const target = SDK.TargetManager.TargetManager.instance().primaryPageTarget();
  const answer = await target.pageAgent().invoke_navigate({url});
  return answer.errorText || answer.getError() || '';
})(%s)"""

# What DevTools recorded of the page, once every request has finished. (A
# new page clears the log, as "Preserve log" is off: with it on, DevTools
# would list the new page's document first, before the old page's requests.)
RECORDED = """(async () => {
  const Logs = await import('./models/logs/logs.js');
  const requests = Logs.NetworkLog.NetworkLog.instance().requests();
  return requests.every((r) => r.finished) && requests.map((r) => r.url());
})()"""

# The network panel's "Copy all as cURL": its copy action for bash, on the
# log DevTools recorded; the clipboard is the host's copyText, caught here.
COPY_ALL = """(async () => {
  const Host = await import('./core/host/host.js');
  const Network = await import('./panels/network/network.js');
  const copied = new Promise((resolve) => {
    Host.InspectorFrontendHost.InspectorFrontendHostInstance.copyText = resolve;
  });
  Network.NetworkPanel.NetworkPanel.instance().networkLogView.copyAllCurlCommand('unix');
  return await copied;
})()"""


def main():
    base, out = sys.argv[1], sys.argv[2]
    logs = []
    with tempfile.TemporaryDirectory() as profile:
        args = [CHROMIUM, "--headless", "--no-sandbox", f"--user-data-dir={profile}"]
        args += ["--remote-debugging-port=0", "--auto-open-devtools-for-tabs", "--no-first-run"]
        args += ["--disable-background-networking", "--disable-component-update"]
        # Loopback is never proxied; anything else finds nothing answering.
        args += ["--proxy-server=127.0.0.1:9", "about:blank"]
        port_file = os.path.join(profile, "DevToolsActivePort")

        def browser_address():
            try:
                with open(port_file) as f:
                    port, path = f.read().split("\n")[:2]
            except (OSError, ValueError):
                return None
            return path and f"ws://127.0.0.1:{port}{path}"

        with browser_process(args, os.path.join(profile, "chromium.log")):
            cdp = Remote(wait_for("Chromium's DevTools protocol server", browser_address, 60))

            def target(kind):
                targets = cdp("Target.getTargets")["targetInfos"]
                found = [t for t in targets if kind(t)]
                return found and found[0]["targetId"]

            tab = wait_for("the tab", lambda: target(lambda t: t["type"] == "page" and t["url"] == "about:blank"))
            window = wait_for("the DevTools window", lambda: target(lambda t: t["url"].startswith("devtools://")))
            tab = cdp("Target.attachToTarget", {"targetId": tab, "flatten": True})["sessionId"]
            devtools = cdp("Target.attachToTarget", {"targetId": window, "flatten": True})["sessionId"]

            def evaluate(session, expression):
                params = {"expression": expression, "awaitPromise": True, "returnByValue": True}
                answer = cdp("Runtime.evaluate", params, session)
                check("exceptionDetails" not in answer, f"{expression}: {answer.get('exceptionDetails')}")
                return answer["result"].get("value")

            wait_for("DevTools to connect to the tab", lambda: evaluate(devtools, READY))
            copies, recorded = [], []
            for path in PATHS:
                error = evaluate(devtools, NAVIGATE % json.dumps(base + path))
                check(not error, f"loading {path}: {error}")
                wait_for(
                    f"{path}'s script to finish",
                    lambda: evaluate(tab, "document.body && document.body.dataset.done") == "yes",
                )
                log = evaluate(tab, "document.getElementById('log').textContent")
                check("failed" not in log, f"the page's script failed on {path}: {log}")
                logs.append(log)
                recorded.append(wait_for(f"DevTools' log of {path}", lambda: evaluate(devtools, RECORDED)))
                copied = evaluate(devtools, COPY_ALL)
                check(copied and copied.startswith("curl "), f"DevTools copied {copied!r} on {path}")
                copies.append(copied)
            cdp("Browser.close")
    with open(out, "w") as f:
        f.write("\n".join(copies) + "\n")
    print(json.dumps({"logs": logs, "recorded": recorded}))


run(main)
