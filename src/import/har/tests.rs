//! `volley import har` on recordings as Chromium, Firefox and Playwright
//! write them, and on broken ones.

use super::time::rfc3339;
use super::*;

/// HAR files in the shape Chromium's devtools and Firefox export them
/// (written for these tests; the real browser's recording is checked
/// in the integration tests).
const CHROMIUM: &str = include_str!("../../../tests/fixtures/import/chromium.har");
const FIREFOX: &str = include_str!("../../../tests/fixtures/import/firefox.har");

fn import_with(text: &str, har: Options) -> Result<Vec<Plan>, Problem> {
    let input = Input {
        name: "session.har".into(),
        text: text.into(),
    };
    import(
        &input,
        &All {
            har,
            ..All::default()
        },
    )
}

fn requests(plan: &Plan) -> Vec<(String, String, Vec<String>)> {
    plan.items
        .iter()
        .filter_map(|i| match &i.step {
            Step::Request(r) => Some((r.method.clone(), r.url.clone(), i.tags.clone())),
            Step::Delay(_) => None,
        })
        .collect()
}

fn request<'p>(plan: &'p Plan, url: &str) -> &'p Request {
    plan.items
        .iter()
        .find_map(|i| match &i.step {
            Step::Request(r) if r.url == url => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request for {url}"))
}

#[test]
fn a_chromium_recording_keeps_the_pages_own_requests() {
    let plans = import_with(CHROMIUM, Options::default()).unwrap();
    assert_eq!(plans.len(), 1);
    let plan = &plans[0];
    assert_eq!(plan.base, "http://shop.test");
    let first = vec!["http-shop-test".to_string()];
    let second = vec!["checkout".to_string()];
    assert_eq!(
        requests(plan),
        [
            ("GET".into(), "/".into(), first.clone()),
            ("POST".into(), "/api/cart".into(), first.clone()),
            (
                "GET".into(),
                "/api/cart?expand=items&note=%7B%7Bx%7D%7D".into(),
                first
            ),
            ("GET".into(), "/checkout".into(), second.clone()),
            ("PUT".into(), "/api/order/7".into(), second),
        ]
    );
    let cart = request(plan, "/api/cart");
    assert_eq!(
        cart.headers,
        [
            ("content-type".to_string(), "application/json".to_string()),
            ("accept".into(), "application/json".into()),
            ("x-csrf".into(), "t0k3n".into()),
            ("user-agent".into(), "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36".into()),
        ]
    );
    assert_eq!(
        cart.body,
        Some(Body::Bytes(b"{\"sku\":\"A-1\",\"qty\":2}".to_vec()))
    );
    assert_eq!(
        request(plan, "/api/cart?expand=items&note=%7B%7Bx%7D%7D").headers[0],
        ("accept".into(), "application/json, text/plain".into())
    );
    assert_eq!(
        request(plan, "/api/order/7").body,
        Some(Body::Bytes(vec![0, 1, 2, 255]))
    );
    assert_eq!(
        plan.items[0].comment.as_deref(),
        Some("page 1: http://shop.test/")
    );
    assert_eq!(plan.items[3].comment.as_deref(), Some("page 2: Checkout"));
    let header = plan.header.join("\n");
    for said in [
        "WebInspector 537.36",
        "the 5 request(s) to http://shop.test, of 12 recorded",
        "3 request(s) for images, fonts, stylesheets and scripts",
        "http://api.shop.test (1)",
        "1 CORS preflight",
        "1 request(s) that are not HTTP",
        "never had an answer to (status 0)",
        "cookie jar",
        ":authority",
        "sec-*",
        "upgrade-insecure-requests",
        "priority",
        "content-length",
    ] {
        assert!(
            header.contains(said),
            "the header does not say {said:?}:\n{header}"
        );
    }
}

#[test]
fn options_keep_what_is_left_out_by_default() {
    let plans = import_with(
        CHROMIUM,
        Options {
            include_origin: vec!["http://api.shop.test".into()],
            include_assets: true,
            keep_cookies: true,
            think_time: true,
        },
    )
    .unwrap();
    assert_eq!(plans.len(), 2);
    let main = &plans[0];
    assert!(requests(main).iter().any(|(_, url, _)| url == "/style.css"));
    assert_eq!(
        request(main, "/")
            .headers
            .iter()
            .find(|(n, _)| n == "cookie")
            .unwrap()
            .1,
        "theme=dark; consent=yes"
    );
    let delays: Vec<Duration> = main
        .items
        .iter()
        .filter_map(|i| match i.step {
            Step::Delay(d) => Some(d),
            Step::Request(_) => None,
        })
        .collect();
    // Page 2 starts at 5.000 s; page 1's last request ended at 1.7205 s.
    assert_eq!(delays.len(), 1);
    assert!((delays[0].as_secs_f64() - 3.2795).abs() < 0.001, "{delays:?}");
    let api = &plans[1];
    assert_eq!(api.suffix.as_deref(), Some("api.shop.test"));
    assert_eq!(api.base, "http://api.shop.test");
    assert_eq!(requests(api).len(), 1, "the preflight stays out");
    assert!(
        main.header
            .iter()
            .any(|h| h.contains("http://api.shop.test are in a plan of their own"))
    );
}

#[test]
fn a_firefox_recording_with_form_params_and_offsets() {
    let plans = import_with(
        FIREFOX,
        Options {
            think_time: true,
            ..Options::default()
        },
    )
    .unwrap();
    let plan = &plans[0];
    assert_eq!(plan.base, "http://shop.test");
    let urls: Vec<String> = requests(plan).into_iter().map(|(_, url, _)| url).collect();
    assert_eq!(urls, ["/", "/login", "/account"]);
    let login = request(plan, "/login");
    assert_eq!(
        login.body,
        Some(Body::Bytes(b"user=ann+lee&next=%2Fa%26b".to_vec()))
    );
    assert!(
        login
            .headers
            .iter()
            .all(|(n, _)| n != "Host" && n != "Connection" && !n.starts_with("Sec-"))
    );
    assert_eq!(plan.items[0].tags, ["volley-shop"]);
    assert!(plan.header.iter().any(|h| h.contains("Firefox 128.0")));
}

#[test]
fn bad_recordings_say_where() {
    for (text, place, says) in [
        ("{\"entries\": []}", "/", "not a HAR file"),
        ("{\"log\": {}}", "/log", "'entries' is missing"),
        ("{\"log\": {\"entries\": {}}}", "/log/entries", "must be a list"),
        (
            "{\"log\": {\"entries\": [{\"request\": {\"method\": \"GET\"}}]}}",
            "/log/entries/0/request",
            "'url' is missing",
        ),
        (
            "{\"log\": {\"entries\": [{\"request\": {\"method\": 1, \"url\": \"http://h/\"}}]}}",
            "/log/entries/0/request/method",
            "must be a string",
        ),
        ("{\"log\": {\"entries\": []}}", "/log", "no HTTP request"),
        ("{\"log\": ", "line 1", "not valid JSON"),
    ] {
        let problem = import_with(text, Options::default()).unwrap_err();
        assert_eq!(problem.place, place, "{text}: {problem}");
        assert!(problem.message.contains(says), "{text}: {problem}");
    }
    let nowhere = import_with(
        CHROMIUM,
        Options {
            include_origin: vec!["http://nope.test".into()],
            ..Options::default()
        },
    );
    assert!(nowhere.unwrap_err().message.contains("no request to it"));
}

#[test]
fn unanswered_requests_and_bodies_not_held_are_said() {
    let entry = |method: &str, path: &str, status: i32, request_extra: &str| {
        format!(
            r#"{{"request": {{"method": "{method}", "url": "http://h.test{path}"{request_extra}}}, "response": {{"status": {status}}}}}"#
        )
    };
    let empty = r#", "postData": {"mimeType": "text/plain", "text": ""}"#;
    let har = format!(
        r#"{{"log": {{"entries": [{}, {}, {}, {}, {}]}}}}"#,
        entry("GET", "/", 200, r#", "headers": []"#),
        entry("GET", "/hang", -1, ""),
        entry("POST", "/empty", 201, &format!(r#", "bodySize": 7{empty}"#)),
        entry(
            "POST",
            "/sized",
            201,
            &format!(r#", "headers": [{{"name": "Content-Length", "value": "5"}}]{empty}"#)
        ),
        entry(
            "POST",
            "/kept",
            201,
            r#", "bodySize": 7, "postData": {"mimeType": "text/plain", "text": "1234567"}"#
        ),
    );
    let plans = import_with(&har, Options::default()).unwrap();
    let urls: Vec<String> = requests(&plans[0]).into_iter().map(|(_, url, _)| url).collect();
    assert_eq!(
        urls,
        ["/", "/empty", "/sized", "/kept"],
        "Playwright's -1 is no answer"
    );
    assert_eq!(request(&plans[0], "/empty").body, None);
    assert_eq!(
        request(&plans[0], "/kept").body,
        Some(Body::Bytes(b"1234567".to_vec()))
    );
    let header = plans[0].header.join("\n");
    assert!(
        header.contains("1 request(s) the browser never had an answer to"),
        "{header}"
    );
    assert!(
        header.contains("2 request(s) had a body the recording does not hold")
            && header.contains("POST /empty (7 bytes), POST /sized (5 bytes)"),
        "{header}"
    );
}

#[test]
fn times_as_har_writes_them() {
    assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
    assert_eq!(rfc3339("2024-05-01T12:00:00.5+02:00"), Some(1_714_557_600.5));
    assert_eq!(
        rfc3339("2024-05-01T10:00:00.500Z"),
        rfc3339("2024-05-01T12:00:00.5+02:00")
    );
    assert_eq!(rfc3339("2000-03-01T00:00:00-00:30"), Some(951_870_600.0));
    assert_eq!(rfc3339("yesterday"), None);
    assert_eq!(rfc3339("2024-13-01T00:00:00Z"), None);
}
