//! `volley import postman`: a Postman collection (v2.1, or v2.0) as its
//! requests in order, each tagged with the folders it sits in.
//!
//! Postman's `{{variables}}` are filled from the collection's variables
//! and the `--env` file's; a variable with no value there, or one an
//! environment marks `secret`, stays a `{{ NAME }}` placeholder that the
//! environment fills when the plan runs, and the header says which to
//! set. Authorization (`auth`, inherited from folders and the collection)
//! always becomes a placeholder: no credential is written into the plan.
//! Pre-request and test scripts cannot run in volley; the header names the
//! items whose scripts were skipped.

mod item;

use super::doc::{self, At};
use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base};
use super::{Input, Options, Problem};
use item::read_request;

/// What the header says after the items are read.
#[derive(Default)]
pub(super) struct Notes {
    /// Placeholders the environment must fill: variable, what it is.
    pub(super) variables: Vec<(String, String)>,
    pub(super) scripts: Vec<String>,
    pub(super) dynamic: Vec<String>,
    pub(super) no_body: Vec<String>,
    pub(super) auth_skipped: Vec<String>,
    pub(super) disabled: usize,
}

/// The known variables: name, value, and whether it is secret.
pub(super) struct Variables {
    pub(super) known: Vec<(String, String, bool)>,
    /// `--keep-secrets`: a credential header's variables are filled in too.
    pub(super) keep_secrets: bool,
    /// `--base`, which stands for the variable a URL names its server by
    /// (`http://{{APIURL}}/users`), path included.
    pub(super) host: Option<Base>,
}

pub fn import(input: &Input, options: &Options) -> Result<Plan, Problem> {
    let document = doc::parse_json(&input.text)?;
    let root = At::root(&document);
    let info = root.get("info").ok_or_else(|| {
        root.problem("not a Postman collection: it has no 'info' (export it as Collection v2.1)")
    })?;
    let schema = info.opt_str("schema")?.unwrap_or("");
    if root.get("requests").is_some() || (!schema.is_empty() && !schema.contains("v2.")) {
        return Err(info.problem(format!(
            "a Postman collection of format '{schema}': export it as Collection v2.1"
        )));
    }
    let mut variables = Variables {
        known: Vec::new(),
        keep_secrets: options.keep_secrets,
        host: options.base.clone(),
    };
    for at in root.list("variable")? {
        if at.opt_bool("disabled")? == Some(true) {
            continue;
        }
        let key = at.opt_str("key")?.or(at.opt_str("id")?).unwrap_or("");
        variables.known.push((
            key.to_string(),
            value_text(&at),
            at.opt_str("type")? == Some("secret"),
        ));
    }
    if let Some(env) = &options.postman_env {
        read_env(env, &mut variables)?;
    }
    let mut notes = Notes::default();
    let mut requests = Vec::new();
    let collection_auth = root.get("auth");
    walk(&root, &[], collection_auth, &variables, &mut notes, &mut requests)?;
    if !root.list("event")?.is_empty() && has_script(&root)? {
        notes.scripts.insert(0, "the collection".into());
    }
    let Some(first) = requests.first() else {
        return Err(root.problem("the collection has no request"));
    };
    let main_origin = first.0.clone();
    let base = options.base.clone().unwrap_or(Base {
        origin: main_origin.clone(),
        path: String::new(),
    });
    let mut items = Vec::new();
    let mut other_origins: Vec<String> = Vec::new();
    for (origin, name, tags, (request, based)) in requests {
        if origin != main_origin {
            if !other_origins.contains(&origin) {
                other_origins.push(origin);
            }
            continue;
        }
        items.push(Item {
            name,
            tags,
            step: Step::Request(if based {
                request
            } else {
                Request {
                    url: format!("{}{}", base.path, request.url),
                    ..request
                }
            }),
            comment: None,
        });
    }
    // Only the placeholders the kept requests hold need setting.
    notes.variables.retain(|(variable, _)| {
        let placeholder = format!("{{{{ {variable} }}}}");
        items.iter().any(|item| match &item.step {
            Step::Request(r) => {
                r.url.contains(&placeholder)
                    || r.headers.iter().any(|(_, v)| v.contains(&placeholder))
                    || matches!(&r.body, Some(Body::Template(t)) if t.contains(&placeholder))
            }
            Step::Delay(_) => false,
        })
    });
    let title = info.opt_str("name")?.unwrap_or("untitled");
    let mut header = vec![format!(
        "Imported by 'volley import postman' from {} (Postman collection '{title}'{}): {} request(s).",
        input.name,
        options
            .postman_env
            .as_ref()
            .map(|e| format!(", variables from {}", e.name))
            .unwrap_or_default(),
        items.len()
    )];
    if !notes.variables.is_empty() {
        let list: Vec<String> = notes
            .variables
            .iter()
            .map(|(v, what)| format!("{v} ({what})"))
            .collect();
        header.push(format!(
            "Set these environment variables before running it (the plan holds no secret): {}.",
            list.join("; ")
        ));
    }
    if !notes.scripts.is_empty() {
        header.push(format!(
            "Skipped: the pre-request and test scripts of {} (volley runs no Postman script).",
            request::list_of(&notes.scripts, 8)
        ));
    }
    if !notes.dynamic.is_empty() {
        header.push(format!(
            "Postman's dynamic variables ({}) have no volley equivalent: each is {{{{ iteration }}}}, the iteration's number.",
            notes.dynamic.join(", ")
        ));
    }
    if !notes.auth_skipped.is_empty() {
        header.push(format!(
            "Authorization not converted (set its header by hand): {}.",
            request::list_of(&notes.auth_skipped, 6)
        ));
    }
    if !notes.no_body.is_empty() {
        header.push(format!(
            "Sent without a body (form-data and file bodies are not converted): {}.",
            request::list_of(&notes.no_body, 6)
        ));
    }
    if notes.disabled > 0 {
        header.push(format!(
            "Left out: {} disabled header(s) and query parameter(s).",
            notes.disabled
        ));
    }
    if !other_origins.is_empty() {
        header.push(format!(
            "Left out: the requests to other origins than {main_origin} ({}); a plan runs against one origin.",
            request::list_of(&other_origins, 5)
        ));
    }
    Ok(Plan {
        header,
        base: base.origin,
        items,
        suffix: None,
    })
}

/// A variable's value as text (Postman allows numbers and booleans).
pub(super) fn value_text(at: &At<'_>) -> String {
    match at.get("value").map(|v| v.node.clone()) {
        Some(doc::Node::String(s)) => s,
        Some(other) => other.to_json_text(),
        None => String::new(),
    }
}

fn read_env(env: &Input, variables: &mut Variables) -> Result<(), Problem> {
    let in_env = |mut p: Problem| {
        p.file = Some(env.name.clone());
        p
    };
    let document = doc::parse_json(&env.text).map_err(in_env)?;
    let root = At::root(&document);
    let values = root
        .get("values")
        .ok_or_else(|| in_env(root.problem("not a Postman environment: it has no 'values'")))?;
    for at in values.items().map_err(in_env)? {
        if at.opt_bool("enabled").map_err(in_env)? == Some(false) {
            continue;
        }
        let key = at.str("key").map_err(in_env)?.to_string();
        let secret = at.opt_str("type").map_err(in_env)? == Some("secret");
        // The environment's value wins over the collection's.
        variables.known.retain(|(k, _, _)| *k != key);
        variables.known.push((key, value_text(&at), secret));
    }
    Ok(())
}

fn has_script(at: &At<'_>) -> Result<bool, Problem> {
    for event in at.list("event")? {
        let Some(script) = event.get("script") else {
            continue;
        };
        let lines = match script.get("exec") {
            Some(exec) => match exec.node {
                doc::Node::Array(lines) => lines
                    .iter()
                    .any(|l| l.as_str().is_some_and(|l| !l.trim().is_empty())),
                doc::Node::String(s) => !s.trim().is_empty(),
                _ => false,
            },
            None => false,
        };
        if lines {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A request read: its origin, name, tags and the request, with whether
/// `--base` gave its server (and so its path's start).
type Read = (String, String, Vec<String>, (Request, bool));

fn walk<'a>(
    folder: &At<'a>,
    tags: &[String],
    auth: Option<At<'a>>,
    variables: &Variables,
    notes: &mut Notes,
    out: &mut Vec<Read>,
) -> Result<(), Problem> {
    for item in folder.list("item")? {
        let name = item.opt_str("name")?.unwrap_or("request").to_string();
        if has_script(&item)? {
            notes.scripts.push(format!("'{name}'"));
        }
        let auth = item.get("auth").or_else(|| auth.clone());
        if item.get("item").is_some() {
            let mut tags = tags.to_vec();
            let tag = name.replace(',', " ");
            if !tags.contains(&tag) {
                tags.push(tag);
            }
            walk(&item, &tags, auth, variables, notes, out)?;
            continue;
        }
        let Some(request) = item.get("request") else {
            return Err(item.problem("an item with neither 'request' nor 'item'"));
        };
        // A request's own auth (`noauth` included) wins over the inherited one.
        let auth = request.get("auth").or(auth);
        let (origin, request, based) = read_request(&request, &name, auth, variables, notes)?;
        out.push((origin, name, tags.to_vec(), (request, based)));
    }
    Ok(())
}

/// Replaces Postman's `{{name}}` with known values, else with a `{{ NAME }}`
/// placeholder (noted); `{{$dynamic}}` with `{{ iteration }}`. Text that is
/// not a variable is kept; a stray `{{` is percent-encoded in URLs.
pub(super) fn fill(text: &str, variables: &Variables, notes: &mut Notes) -> String {
    fill_in(text, variables, notes, false)
}

/// [`fill`] for a credential header's value (`Bearer {{token}}`): unless
/// `--keep-secrets`, each variable becomes a placeholder named after it
/// (`{{ TOKEN }}`), whatever value the collection gives it.
pub(super) fn fill_secret(text: &str, variables: &Variables, notes: &mut Notes) -> String {
    fill_in(text, variables, notes, !variables.keep_secrets)
}

fn fill_in(text: &str, variables: &Variables, notes: &mut Notes, all_secret: bool) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = after[..close].trim();
        if let Some(dynamic) = name.strip_prefix('$') {
            if !notes.dynamic.iter().any(|d| d == dynamic) {
                notes.dynamic.push(format!("${dynamic}"));
            }
            out.push_str("{{ iteration }}");
        } else {
            match variables.known.iter().find(|(k, _, _)| k == name) {
                Some((_, value, false)) if !all_secret && !request::looks_templated(value) => {
                    out.push_str(value)
                }
                known => {
                    let variable = request::env_name(name);
                    let what = if all_secret {
                        format!("'{name}', in a credential header")
                    } else if known.is_some() {
                        format!("the secret '{name}'")
                    } else {
                        format!("'{name}', which has no value in the collection")
                    };
                    if !notes.variables.iter().any(|(v, _)| *v == variable) {
                        notes.variables.push((variable.clone(), what));
                    }
                    out.push_str(&format!("{{{{ {variable} }}}}"));
                }
            }
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLLECTION: &str = include_str!("../../../tests/fixtures/import/serve.postman_collection.json");
    const ENVIRONMENT: &str = include_str!("../../../tests/fixtures/import/local.postman_environment.json");

    fn import_with(collection: &str, env: Option<&str>) -> Result<Plan, Problem> {
        let input = Input {
            name: "c.json".into(),
            text: collection.into(),
        };
        let options = Options {
            postman_env: env.map(|text| Input {
                name: "env.json".into(),
                text: text.into(),
            }),
            ..Options::default()
        };
        import(&input, &options)
    }

    fn request<'p>(plan: &'p Plan, name: &str) -> &'p Request {
        plan.items
            .iter()
            .find_map(|i| match &i.step {
                Step::Request(r) if i.name == name => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no item {name}"))
    }

    #[test]
    fn folders_variables_auth_and_scripts() {
        let plan = import_with(COLLECTION, Some(ENVIRONMENT)).unwrap();
        assert_eq!(plan.base, "http://127.0.0.1:3000");
        let names: Vec<(&str, &[String])> = plan
            .items
            .iter()
            .map(|i| (i.name.as_str(), &i.tags[..]))
            .collect();
        let auth = ["Auth".to_string()];
        let admin = ["Users".to_string(), "Admin".to_string()];
        assert_eq!(
            names,
            [
                ("Log in", &auth[..]),
                ("Who am I", &auth[..]),
                ("A page", &admin[..1]),
                ("Create", &admin[..]),
                ("Upload", &admin[..]),
                ("GraphQL", &admin[..]),
                ("Ping", &[][..]),
            ]
        );
        let login = request(&plan, "Log in");
        assert_eq!(
            login.body,
            Some(Body::Template(
                "{\"username\": \"bob\", \"password\": \"secret\"}".into()
            ))
        );
        assert!(
            login.headers.iter().all(|(n, _)| n != "Authorization"),
            "noauth on the request"
        );
        let me = request(&plan, "Who am I");
        assert_eq!(
            me.headers,
            [(
                "Authorization".to_string(),
                "Bearer {{ POSTMAN_TOKEN }}".to_string()
            )]
        );
        assert_eq!(
            request(&plan, "A page").url,
            "/api/users?page=2",
            "a disabled parameter is left out"
        );
        let create = request(&plan, "Create");
        assert_eq!(create.body, Some(Body::Template("name=ann+lee".into())));
        assert!(
            create
                .headers
                .contains(&("X-Request-Id".into(), "{{ iteration }}".into()))
        );
        assert!(
            request(&plan, "GraphQL")
                .headers
                .contains(&("X-Key".into(), "{{ POSTMAN_API_KEY }}".into()))
        );
        let header = plan.header.join("\n");
        assert!(
            !header.contains("tok-bob") && !plan.items.iter().any(|i| format!("{i:?}").contains("tok-bob")),
            "the secret stays out"
        );
        for said in [
            "POSTMAN_TOKEN",
            "POSTMAN_API_KEY",
            "the collection, 'Log in'",
            "$guid",
            "'Upload'",
            "2 disabled",
            "https://other.example",
        ] {
            assert!(header.contains(said), "{said}: {header}");
        }
        assert!(
            !header.contains("MISSING"),
            "only what the plan holds needs setting: {header}"
        );
    }

    #[test]
    fn a_credential_headers_variable_is_read_from_the_environment() {
        let collection = r#"{"info": {"name": "k"}, "variable": [{"key": "token", "value": "tok-live"}],
            "item": [{"name": "me", "request": {"method": "GET", "url": "http://h.test/me",
            "header": [{"key": "Authorization", "value": "Bearer {{token}}"}, {"key": "X-Who", "value": "{{token}}"}]}}]}"#;
        let plan = import_with(collection, None).unwrap();
        let me = request(&plan, "me");
        assert_eq!(
            me.headers,
            [
                ("Authorization".to_string(), "Bearer {{ TOKEN }}".to_string()),
                ("X-Who".into(), "tok-live".into())
            ]
        );
        assert!(
            plan.header
                .iter()
                .any(|h| h.contains("TOKEN ('token', in a credential header)"))
        );
    }

    #[test]
    fn base_stands_for_the_host_variable_and_its_path() {
        let collection = r#"{"info": {"name": "b"}, "variable": [{"key": "root", "value": "http://old.test/v1"}],
            "item": [{"name": "users", "request": {"method": "GET", "url": "http://{{APIURL}}/users?x=1"}},
                     {"name": "rooted", "request": {"method": "GET", "url": "{{root}}/items"}}]}"#;
        let input = Input {
            name: "c.json".into(),
            text: collection.into(),
        };
        let options = Options {
            base: Some(Base::parse("http://127.0.0.1:3000/v2").unwrap()),
            ..Options::default()
        };
        let plan = import(&input, &options).unwrap();
        assert_eq!(plan.base, "http://127.0.0.1:3000");
        assert_eq!(request(&plan, "users").url, "/v2/users?x=1", "no --env needed");
        assert_eq!(
            request(&plan, "rooted").url,
            "/v2/items",
            "the base path replaces /v1"
        );
        assert!(!plan.header.join("\n").contains("APIURL"), "{:?}", plan.header);
    }

    #[test]
    fn without_the_environment_unknown_variables_are_placeholders() {
        let plan = import_with(COLLECTION, None).unwrap();
        let login = request(&plan, "Log in");
        assert_eq!(
            login.body,
            Some(Body::Template(
                "{\"username\": \"bob\", \"password\": \"{{ PASSWORD }}\"}".into()
            ))
        );
        assert!(
            plan.header
                .join("\n")
                .contains("PASSWORD ('password', which has no value")
        );
    }

    #[test]
    fn bad_collections_say_where() {
        for (text, env, place, says) in [
            ("{\"item\": []}", None, "/", "not a Postman collection"),
            (
                "{\"info\": {\"schema\": \"https://schema.getpostman.com/json/collection/v1.0.0/\"}, \"requests\": []}",
                None,
                "/info",
                "export it as Collection v2.1",
            ),
            (
                "{\"info\": {}, \"item\": [{\"name\": \"x\"}]}",
                None,
                "/item/0",
                "neither 'request' nor 'item'",
            ),
            (
                "{\"info\": {}, \"item\": [{\"name\": \"x\", \"request\": {\"method\": \"GET\"}}]}",
                None,
                "/item/0/request",
                "'url' is missing",
            ),
            (
                "{\"info\": {}, \"item\": [{\"name\": \"x\", \"request\": \"{{base}}/a\"}]}",
                None,
                "/item/0/request",
                "give its variables values",
            ),
            ("{\"info\": {}, \"item\": []}", None, "/", "no request"),
            (COLLECTION, Some("{\"values\": 1}"), "/values", "must be a list"),
        ] {
            let problem = import_with(text, env).unwrap_err();
            assert_eq!(problem.place, place, "{text}: {problem}");
            assert!(problem.message.contains(says), "{text}: {problem}");
        }
        let in_env = import_with(COLLECTION, Some("{}")).unwrap_err();
        assert_eq!(in_env.file.as_deref(), Some("env.json"));
    }
}
