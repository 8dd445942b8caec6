"""Opens a volley HTML report from disk in chromium and checks it as a reader
would: no console errors, every chart drew all its data, hovering an interval
shows the JSON report's value for it (under -R the service time's too,
drawn dashed beside the latency), a drag zooms the time axis (and a
double-click resets it), a legend click hides a series.

usage: check_report.py REPORT.html REPORT.json SCREENSHOT.png [compare]
Prints the draw time the page measured and how many lines the first latency
chart's p99 is drawn in; exits non-zero on a failed check."""

import json
import sys
import time

from common import browser_page, check, no_json_in, number, run, x_pixel

QUANTILES = ("p50", "p90", "p99", "max")


def answered(row):
    return row["requests"] > row["errors"]


def pieces(rows):
    """How many runs of intervals with responses there are: the latency
    chart's lines, each ending at an interval without one (a gap)."""
    return sum(1 for i, r in enumerate(rows) if answered(r) and (i == 0 or not answered(rows[i - 1])))


def check_run_charts(page, report):
    runs = report["runs"]
    for i, run in enumerate(runs):
        rows = len(run["series"])
        for name in ("throughput", "latency", "outcomes") + (("target-rss", "target-cpu") if run.get("target") else ()):
            fig = page.locator(f'figure[data-chart="{name}-{i}"]')
            check(fig.count() == 1, f"chart {name}-{i} is missing")
            drawn = int(fig.get_attribute("data-points"))
            # An interval without responses has no latency: a gap, not 0 ms.
            expected = sum(map(answered, run["series"])) if name == "latency" else rows
            check(drawn == expected, f"chart {name}-{i} drew {drawn} of {expected} intervals")
            check(fig.locator("polyline").count() >= 1, f"chart {name}-{i} has no line")
        fig = page.locator(f'figure[data-chart="latency-{i}"]')
        lines = fig.locator('polyline[data-series="p99"]').count()
        expected = max(1, pieces(run["series"]))
        check(lines == expected, f"latency-{i}'s p99 is {lines} lines, not {expected}: a gap was not left for each interval without responses")
        spectrum = page.locator(f'figure[data-chart="spectrum-{i}"]')
        if run["summary"]["ok"]:
            check(int(spectrum.get_attribute("data-points")) >= 10, f"spectrum-{i} drew too few points")


def check_hover(page, run, index):
    """Hovers the middle interval; the values shown must be the JSON
    report's for the interval the tooltip names, which must be the one
    under the pointer (or its neighbour, at 1-2 px per interval)."""
    fig = page.locator(f'figure[data-chart="latency-{index}"]')
    rows = run["series"]
    target = len(rows) // 2
    # The interval nearest the middle that has figures to show.
    target = min((i for i, r in enumerate(rows) if answered(r)), key=lambda i: abs(i - target), default=target)
    x, y = x_pixel(page, fig, rows[target]["t_s"])
    page.mouse.move(x, y)
    tip = fig.locator(".tip")
    check(tip.is_visible(), "hovering the latency chart shows no values")
    shown_t = number(tip.locator(".tip-x").inner_text().split(":", 1)[1])
    at = [i for i, r in enumerate(rows) if abs(r["t_s"] - shown_t) < 0.0005]
    check(len(at) == 1 and abs(at[0] - target) <= 1,
          f"hovering t={rows[target]['t_s']} names t={shown_t}, not that interval")
    row = rows[at[0]]
    shown_values = [(key, row[key]) for key in QUANTILES]
    # Under -R the service time of the same interval is shown beside it.
    if row.get("service"):
        shown_values += [(f"service {key}", row["service"][key]) for key in QUANTILES]
    for series, expected in shown_values:
        shown = number(tip.locator(f'.tip-row[data-series="{series}"] .tip-value').inner_text())
        check(abs(shown - expected) < 0.0005 + 1e-9,
              f"hover at t={row['t_s']} shows {series} {shown}, the JSON report has {expected}")
    page.mouse.move(0, 0)


def service_lines(page, run, index):
    """Under -R the latency chart draws each interval's service time too, as
    dashed lines beside the latency's; returns how many it drew (each over
    every interval). Every row of such a report must carry it."""
    rows = run["series"]
    if not any("service" in r for r in rows):
        return 0
    check(all("service" in r for r in rows), "some intervals of an open-model run have no service time")
    fig = page.locator(f'figure[data-chart="latency-{index}"]')
    drawn = 0
    for key in QUANTILES:
        line = fig.locator(f'polyline[data-series="service {key}"]')
        check(line.count() == 1, f"the latency chart has no service {key} line")
        check("dashed" in line.get_attribute("class"), f"the service {key} line is not dashed")
        points = len(line.get_attribute("points").split())
        check(points == len(rows), f"the service {key} line drew {points} of {len(rows)} intervals")
        drawn += 1
    return drawn


def check_zoom_and_legend(page, index):
    fig = page.locator(f'figure[data-chart="latency-{index}"]')
    x0, x1 = float(fig.get_attribute("data-x0")), float(fig.get_attribute("data-x1"))
    fig.scroll_into_view_if_needed()
    box = fig.locator("svg").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=4)
    page.mouse.up()
    z0, z1 = float(fig.get_attribute("data-x0")), float(fig.get_attribute("data-x1"))
    check(z0 > x0 and z1 < x1 and (z1 - z0) < 0.5 * (x1 - x0),
          f"a drag did not zoom the time axis: {x0}..{x1} became {z0}..{z1}")
    check(int(fig.get_attribute("data-points")) >= 2, "the zoomed chart drew nothing")
    fig.locator("svg").dblclick()
    check((float(fig.get_attribute("data-x0")), float(fig.get_attribute("data-x1"))) == (x0, x1),
          "a double-click did not reset the zoom")
    # One line per run of intervals with responses (a gap between them).
    lines = fig.locator('polyline[data-series="p99"]').count()
    check(lines >= 1, "no p99 line")
    fig.locator('.legend-entry[data-series="p99"]').click()
    check(fig.locator('polyline[data-series="p99"]').count() == 0, "a legend click did not hide p99")
    fig.locator('.legend-entry[data-series="p99"]').click()
    check(fig.locator('polyline[data-series="p99"]').count() == lines, "a second legend click did not show p99 again")


def check_step(page, step):
    for name in ("levels-latency", "levels-rps", "levels-errors"):
        fig = page.locator(f'figure[data-chart="{name}"]')
        drawn = int(fig.get_attribute("data-points"))
        check(drawn == len(step["levels"]), f"{name} drew {drawn} of {len(step['levels'])} levels")
        if step["verdict"]["max_load"] is not None:
            check(fig.locator(".marker").count() == 1, f"{name} does not mark the maximum load")
    text = page.inner_text("section.step")
    for words in ("Responsiveness", "Throughput", "Maximum load", "Past the maximum", "service level asked for"):
        check(words in text, f"the step verdict does not say '{words}'")


def check_shards(page, report):
    merged = report.get("merged")
    if not merged:
        return
    shards = page.locator("section.shards")
    check(shards.count() == 1, "a merged report shows no shards section")
    rows = shards.locator("tr").count() - 1
    check(rows == len(merged["shards"]), f"the shards table has {rows} rows, the report {len(merged['shards'])} shards")
    text = shards.inner_text()
    for index in merged.get("missing", []):
        check(f"missing: shard {index}" in text, f"missing shard {index} is not named")


def main():
    html, report_path, screenshot = sys.argv[1:4]
    comparison = sys.argv[4:] == ["compare"]
    report = json.load(open(report_path))
    with browser_page() as page:
        started = time.monotonic()
        page.goto(f"file://{html}")
        page.wait_for_selector("body[data-charts-ok]", timeout=15000)
        loaded_s = time.monotonic() - started
        check(page.get_attribute("body", "data-charts-ok") == "true", "a chart drew nothing")
        lines = 0
        p99_lines = None
        if not comparison:
            check_run_charts(page, report)
            p99_lines = page.locator('figure[data-chart="latency-0"] polyline[data-series="p99"]').count()
            lines = service_lines(page, report["runs"][0], 0)
            check_hover(page, report["runs"][0], 0)
            check_zoom_and_legend(page, 0)
            if report.get("step"):
                check_step(page, report["step"])
            if any(r.get("steps") for r in report["runs"]):
                names = page.locator("table.items td:first-child").all_inner_texts()
                expected = [s["name"] for s in report["runs"][0]["steps"]]
                check(names == expected, f"plan items shown {names}, expected {expected}")
        else:
            check(page.locator(".compare li[data-metric]").count() >= 3, "no comparison verdicts")
            for name in ("compare-rps-0", "compare-latency-0", "compare-spectrum-0"):
                check(int(page.get_attribute(f'figure[data-chart="{name}"]', "data-points")) >= 2, f"{name} drew nothing")
        check_shards(page, report)
        no_json_in(page)
        page.screenshot(path=screenshot, full_page=True)
        check(not page.errors, f"console errors: {page.errors}")
        draw_ms = float(page.get_attribute("body", "data-draw-ms"))
        print(json.dumps({"draw_ms": draw_ms, "load_s": round(loaded_s, 3), "service_lines": lines, "p99_lines": p99_lines}))


if __name__ == "__main__":
    run(main)
