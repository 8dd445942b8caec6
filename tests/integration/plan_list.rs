//! `volley plan --list-tags` / `--list-tasks` (drill's habits: print and
//! exit, no load) and drill's special tags `always` and `never`.

use super::support::{num, stderr, stdout, target, url, volley, volley_json};
use std::path::Path;

const PART: &str = "---\n- name: Small\n  request: {url: /hi}\n  tags: [small]\n- name: Rare\n  request: {url: /hi}\n  tags: [never, rare]\n";

const PLAN: &str = r#"iterations: 2
plan:
  - name: Sizes
    include: part.yml
  - name: Always
    request:
      url: /api/users/{{ iteration }}
      headers: {X-A: 'b: c'}
    tags: [always]
  - name: Big
    request: {url: /hi}
    with_items: [1, 2]
    tags: [big, small]
"#;

fn write_plan(dir: &Path) -> String {
    std::fs::write(dir.join("part.yml"), PART).unwrap();
    let path = dir.join("benchmark.yml");
    std::fs::write(&path, PLAN).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn list_tags_prints_every_tag_and_sends_nothing() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let out = volley(&["plan", &plan, "--base", &url(&server, ""), "--list-tags"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "\nTags            [\"always\", \"big\", \"never\", \"rare\", \"small\"]\n"
    );
    assert_eq!(server.stats().connections_accepted, 0);
}

#[test]
fn list_tasks_prints_the_kept_items_as_yaml_and_sends_nothing() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let args = ["plan", &plan, "--base", &url(&server, ""), "--list-tasks"];
    let out = volley(&[&args[..], &["--tags", "small", "--skip-tags", "big"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("\nTags            [\"small\"]\nSkip-Tags       [\"big\"]\n"),
        "{text}"
    );
    // Small (from the include) and Always; not Big (skipped) nor Rare (never).
    assert!(
        text.contains("part.yml:2\nname: Small\nrequest:\n  url: /hi\ntags:\n- small\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "name: Always\nrequest:\n  url: \"/api/users/{{ iteration }}\"\n  headers:\n    X-A: \"b: c\"\n"
        ),
        "{text}"
    );
    assert!(!text.contains("Big") && !text.contains("Rare"), "{text}");
    // Without --tags every item but the `never` one.
    let all = stdout(&volley(&args));
    assert!(all.contains("name: Big") && !all.contains("name: Rare"), "{all}");
    assert_eq!(server.stats().connections_accepted, 0);
    // A filter that keeps nothing is an error, as in drill.
    let none = volley(&[&args[..], &["--skip-tags", "small,always"]].concat());
    assert!(!none.status.success());
    assert!(stderr(&none).contains("no plan item left"), "{}", stderr(&none));
}

#[test]
fn always_and_never_tags_follow_drill() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let base = url(&server, "");
    let steps = |extra: &[&str]| {
        let (out, report) = volley_json(&[&["plan", plan.as_str(), "--base", &base][..], extra].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        report["runs"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_string(),
                    num(&s["summary"]["requests"]) as u64,
                )
            })
            .collect::<Vec<_>>()
    };
    let named = |list: &[(&str, u64)]| list.iter().map(|(n, c)| (n.to_string(), *c)).collect::<Vec<_>>();
    // No tags: all but `never`; Big runs once per item.
    assert_eq!(steps(&[]), named(&[("Small", 2), ("Always", 2), ("Big", 4)]));
    // --tags big: Big, and Always (which runs unless skipped); Rare is
    // `never`: it runs only when --tags names never. Counts checked
    // against drill 0.9 on this plan.
    assert_eq!(steps(&["--tags", "big"]), named(&[("Always", 2), ("Big", 4)]));
    assert_eq!(steps(&["--tags", "never"]), named(&[("Rare", 2), ("Always", 2)]));
    assert_eq!(
        steps(&["--skip-tags", "always"]),
        named(&[("Small", 2), ("Big", 4)])
    );
    let both = volley(&["plan", &plan, "--base", &base, "--tags", "a", "--skip-tags", "a"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        stderr(&both).contains("'a' is in both --tags and --skip-tags"),
        "{}",
        stderr(&both)
    );
}
