//! The HTML report, opened in headless Chromium: every chart is present and
//! drew data (the page's own script counts the points the browser rendered),
//! a saved report renders the same way, and a screenshot is written for a
//! person to look at. CI installs Debian's chromium (.ci/run); elsewhere the
//! browser part is skipped with a note when chromium is missing.

use super::support::{exclusive, stderr, volley};
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {name}"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
}

/// Runs headless Chromium on a local file with the given extra flags.
fn headless(browser: &Path, page: &Path, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The chart names the page's check found, with their point counts.
fn charts(dom: &str) -> Vec<(String, usize)> {
    let start = dom.find("id=\"chart-check\">").expect("the check ran") + "id=\"chart-check\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    dom[start..end]
        .lines()
        .filter_map(|l| {
            l.split_once(':')
                .map(|(n, c)| (n.to_string(), c.trim().parse().unwrap_or(0)))
        })
        .collect()
}

#[test]
fn the_html_report_shows_every_chart_with_data() {
    let _exclusive = exclusive();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serve = format!("{} serve --addr 127.0.0.1:{port}", env!("CARGO_BIN_EXE_volley"));
    let dir = tempfile::tempdir().unwrap();
    let (html, json, again) = (
        dir.path().join("run.html"),
        dir.path().join("run.json"),
        dir.path().join("again.html"),
    );
    let out = volley(&[
        "run",
        "--spawn",
        &serve,
        "-c",
        "20",
        "-d",
        "2s",
        "--interval",
        "250ms",
        "-q",
        "--html",
        html.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
        &format!("http://127.0.0.1:{port}/alloc/256"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    for name in [
        "throughput-0",
        "latency-0",
        "spectrum-0",
        "outcomes-0",
        "target-rss-0",
        "target-cpu-0",
    ] {
        assert!(page.contains(&format!("data-chart=\"{name}\"")), "{name} missing");
    }
    assert!(
        !page.contains("http://") || !page.contains("<script src"),
        "nothing loaded from a network"
    );
    let out = volley(&[
        "report",
        json.to_str().unwrap(),
        "--html",
        again.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must check the HTML report in chromium (.ci/run installs it)"
        );
        eprintln!("note: chromium not installed; the in-browser check of the HTML report was skipped");
        return;
    };
    for report in [&html, &again] {
        let dom = headless(&browser, report, &["--dump-dom"]);
        assert!(
            dom.contains("data-charts-ok=\"true\""),
            "a chart drew no data: {:?}",
            charts(&dom)
        );
        let found = charts(&dom);
        assert_eq!(found.len(), 6, "{found:?}");
        assert!(found.iter().all(|(_, points)| *points >= 2), "{found:?}");
    }
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &browser,
        &html,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=960,2400",
        ],
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "a screenshot of the report at {}", shot.display());
    eprintln!("screenshot of the HTML report: {}", shot.display());
}

/// A step report shows its levels and knee; a plan report its steps.
#[test]
fn step_and_plan_reports_have_their_sections() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let base = super::support::url(&server, "");
    let dir = tempfile::tempdir().unwrap();
    let step_html = dir.path().join("step.html");
    let out = volley(&[
        "step",
        "--levels",
        "1,2",
        "--step-duration",
        "400ms",
        "--interval",
        "100ms",
        "--slo",
        "p99<1s",
        "-q",
        "--html",
        step_html.to_str().unwrap(),
        &format!("{base}/sleep/5"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&step_html).unwrap();
    assert!(
        page.contains("Load levels") && page.contains("Maximum load: <b>2 connections</b>"),
        "{page}"
    );
    assert!(page.contains("data-chart=\"levels\"") && page.contains("data-chart=\"throughput-1\""));

    let plan = dir.path().join("plan.yml");
    std::fs::write(
        &plan,
        "plan:\n  - name: First\n    request: {url: /hi}\n  - name: Second\n    request: {url: /hi}\n",
    )
    .unwrap();
    let plan_html = dir.path().join("plan.html");
    let out = volley(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &base,
        "-n",
        "50",
        "-q",
        "--html",
        plan_html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&plan_html).unwrap();
    assert!(
        page.contains("Plan steps") && page.contains("<td>First</td>") && page.contains("<td>Second</td>")
    );

    if let Some(browser) = chromium() {
        let dom = headless(&browser, &step_html, &["--dump-dom"]);
        assert!(dom.contains("data-charts-ok=\"true\""), "{:?}", charts(&dom));
    }
}
