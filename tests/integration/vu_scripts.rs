//! `volley script`: virtual users in Lua, checked against what a logging
//! server received: each VU's iterations, requests named as the script
//! names them, checks counted, cookies kept per VU, a Lua error ending its
//! iteration alone, and bad scripts refused with one line.

use super::support::{logging_target, stderr, volley, volley_json};
use std::path::Path;

/// Writes `text` as `name` in `dir`; its path.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn vus_iterate_with_names_and_checks() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "shop.lua",
        r#"
options = { vus = 3, iterations = 30 }
function default()
  local list = http.get("/api/users", { name = "list" })
  local users = list:json().users
  check(list, { ["list is 200"] = function(r) return r.status == 200 end })
  local res = http.post("/echo", "vu=" .. vu.id .. "&n=" .. #users,
    { headers = { ["Content-Type"] = "application/x-www-form-urlencoded" } })
  check(res, {
    ["echo is 200"] = function(r) return r.status == 200 end,
    ["never"] = function(r) return false end,
  })
  if vu.id == 1 and vu.iteration == 2 then error("planned failure") end
  group("again", function() http.get("/hi?vu=" .. vu.id) end)
end
"#,
    );
    let url = format!("http://{}", server.addr());
    let (out, report) = volley_json(&["script", &script, &url, "-t", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = &report["runs"][0];
    assert_eq!(run["iterations"], 30, "{run}");
    let logged = server.requests();
    let count = |path: &str| logged.iter().filter(|r| r.target.starts_with(path)).count();
    // The failing iteration ends before its group's request.
    assert_eq!((count("/api/users"), count("/echo"), count("/hi")), (30, 30, 29));
    let bodies: Vec<String> = logged
        .iter()
        .filter(|r| r.target == "/echo")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    for vu in 1..=3 {
        assert_eq!(
            bodies
                .iter()
                .filter(|b| b.starts_with(&format!("vu={vu}&")))
                .count(),
            10,
            "each of 3 VUs runs 10 of the 30 iterations: {bodies:?}"
        );
    }
    assert!(bodies.iter().all(|b| b.ends_with("&n=10")), "{bodies:?}");
    let steps: Vec<(String, u64)> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["summary"]["requests"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(steps.contains(&("list".to_string(), 30)), "{steps:?}");
    assert!(steps.contains(&("POST /echo".to_string(), 30)), "{steps:?}");
    let again: u64 = steps
        .iter()
        .filter(|(n, _)| n.starts_with("again::GET /hi?vu="))
        .map(|(_, c)| c)
        .sum();
    assert_eq!(again, 29, "{steps:?}");
    let check = |name: &str| {
        let found = run["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned();
        let found = found.unwrap_or_else(|| panic!("no check {name}: {}", run["checks"]));
        (
            found["passes"].as_u64().unwrap(),
            found["fails"].as_u64().unwrap(),
        )
    };
    assert_eq!(check("list is 200"), (30, 0));
    assert_eq!(check("echo is 200"), (30, 0));
    assert_eq!(check("never"), (0, 30));
    let summary = &run["summary"];
    assert_eq!(summary["errors_by_kind"]["script"], 1, "{summary}");
    let example = summary["error_examples"]["script"].as_str().unwrap();
    assert!(example.contains("shop.lua:13: planned failure"), "{example}");
}

#[test]
fn each_vu_keeps_its_own_cookies() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    // /api/login sets a session cookie, and /api/me answers with the user
    // whose session it carries (the embedded target's password is
    // `secret`): each VU must get its own back.
    let script = write(
        dir.path(),
        "cookies.lua",
        r#"
function default()
  if vu.iteration == 0 then
    http.post("/api/login", '{"username":"u' .. vu.id .. '","password":"secret"}',
      { headers = { ["Content-Type"] = "application/json" } })
  end
  local me = http.get("/api/me")
  check(me, { ["mine"] = function(r) return r.status == 200 and r:json().user == "u" .. vu.id end })
end
"#,
    );
    let url = format!("http://{}", server.addr());
    let (out, report) = volley_json(&["script", &script, &url, "--vus", "3", "-n", "9", "-t", "2", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let checks = &report["runs"][0]["checks"][0];
    assert_eq!(
        (checks["passes"].as_u64(), checks["fails"].as_u64()),
        (Some(9), Some(0)),
        "{checks}"
    );
    let logged = server.requests();
    assert_eq!(logged.iter().filter(|r| r.target == "/api/login").count(), 3);
    assert_eq!(logged.iter().filter(|r| r.target == "/api/me").count(), 9);
}

#[test]
fn bad_scripts_get_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let syntax = write(dir.path(), "syntax.lua", "local a = 1\nfunction (\n");
    let out = volley(&["script", &syntax, "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("syntax.lua:2:"), "{err}");
    let setup = write(
        dir.path(),
        "setup.lua",
        "function setup()\n  error('no setup')\nend\nfunction default() end\n",
    );
    let out = volley(&["script", &setup, "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("setup(): ") && stderr(&out).contains("setup.lua:2: no setup"),
        "{}",
        stderr(&out)
    );
    let out = volley(&["script", &setup]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("give the URL"), "{}", stderr(&out));
}
