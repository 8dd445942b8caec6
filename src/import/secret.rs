//! No secret is written into a plan: what an importer read as recorded
//! (a HAR's `Authorization`, a collection's API-key header, curl's `-H`,
//! an OpenAPI example), credentials in header fields, query parameters
//! and cookies become `{{ NAME }}` references to environment variables,
//! which the plan reads when it runs. The plan's header says which to set;
//! `--keep-secrets` keeps them as recorded instead.
//!
//! A value that already holds a `{{ }}` reference (an importer's own
//! placeholder, a Postman variable) is left as it is.

use super::plan::{Plan, Step};
use super::request::{self, env_name, is_secret_field, is_secret_parameter, looks_templated};

/// The variables one plan reads instead of its secrets.
#[derive(Debug, Default)]
struct Vault {
    /// Per variable: its name, what it is named after, the recorded value
    /// and what it is.
    vars: Vec<(String, String, String, String)>,
    /// Names the plan already references (its importer's placeholders).
    taken: Vec<String>,
}

impl Vault {
    /// The reference standing for `value`: the same variable for the same
    /// value, else a new one named after `name` (`AUTHORIZATION`, then
    /// `AUTHORIZATION_2`...).
    fn reference(&mut self, name: &str, value: &str, what: String) -> String {
        let base = env_name(name);
        if let Some((var, ..)) = self.vars.iter().find(|(_, b, v, _)| *b == base && *v == value) {
            return format!("{{{{ {var} }}}}");
        }
        let used =
            |var: &str| self.taken.iter().any(|t| t == var) || self.vars.iter().any(|(v, ..)| v == var);
        let mut var = base.clone();
        let mut n = 2;
        while used(&var) {
            var = format!("{base}_{n}");
            n += 1;
        }
        self.vars.push((var.clone(), base, value.to_string(), what));
        format!("{{{{ {var} }}}}")
    }

    /// A credential field's value: its scheme kept (`Bearer {{ AUTHORIZATION }}`),
    /// the credential referenced.
    fn field(&mut self, name: &str, value: &str) -> String {
        let what = format!("the {name} header");
        match value.split_once(' ') {
            Some((scheme, credential))
                if !scheme.is_empty()
                    && scheme.chars().all(|c| c.is_ascii_alphabetic())
                    && !credential.trim().is_empty() =>
            {
                format!("{scheme} {}", self.reference(name, credential.trim(), what))
            }
            _ => self.reference(name, value, what),
        }
    }

    /// A `Cookie` field's value with each pair's value referenced
    /// (`sid={{ COOKIE_SID }}`).
    fn cookies(&mut self, value: &str) -> String {
        let pairs: Vec<String> = value
            .split(';')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if !value.is_empty() => {
                    let what = format!("the cookie '{name}'");
                    format!(
                        "{name}={}",
                        self.reference(&format!("cookie_{name}"), value, what)
                    )
                }
                _ => pair.to_string(),
            })
            .collect();
        pairs.join("; ")
    }

    /// A path whose credential query parameters are referenced.
    fn path(&mut self, path: &str) -> String {
        let Some((before, query)) = path.split_once('?') else {
            return path.to_string();
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value))
                    if !value.is_empty() && !looks_templated(value) && {
                        let decoded: String = url::form_urlencoded::parse(name.as_bytes())
                            .map(|(n, _)| n.into_owned())
                            .collect();
                        is_secret_parameter(&decoded)
                    } =>
                {
                    let what = format!("the query parameter '{name}'");
                    format!("{name}={}", self.reference(name, value, what))
                }
                _ => pair.to_string(),
            })
            .collect();
        format!("{before}?{}", pairs.join("&"))
    }
}

/// Replaces the secrets `plan` holds with references to environment
/// variables, and says in its header which to set.
pub fn keep_out(plan: &mut Plan) {
    let mut vault = Vault {
        taken: referenced(plan),
        ..Vault::default()
    };
    for item in &mut plan.items {
        let Step::Request(r) = &mut item.step else {
            continue;
        };
        r.url = vault.path(&r.url);
        for (name, value) in &mut r.headers {
            if looks_templated(value) {
                continue;
            }
            if name.eq_ignore_ascii_case("cookie") {
                *value = vault.cookies(value);
            } else if is_secret_field(name) {
                *value = vault.field(name, value);
            }
        }
    }
    if !vault.vars.is_empty() {
        let list: Vec<String> = vault
            .vars
            .iter()
            .map(|(var, _, _, what)| format!("{var} ({what})"))
            .collect();
        plan.header.push(format!(
            "Secrets are read from the environment when the plan runs (--keep-secrets writes them as recorded): set {}.",
            request::list_of(&list, 12)
        ));
    }
}

/// The environment variables a plan's requests reference (an imported
/// plan assigns no variable of its own), in order of first use.
pub fn referenced(plan: &Plan) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut scan = |text: &str| {
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else { break };
            let name = after[..close].trim();
            if !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !matches!(name, "iteration" | "index" | "item" | "base")
                && !names.iter().any(|n| n == name)
            {
                names.push(name.to_string());
            }
            rest = &after[close + 2..];
        }
    };
    for item in &plan.items {
        if let Step::Request(r) = &item.step {
            scan(&r.url);
            for (_, value) in &r.headers {
                scan(value);
            }
            if let Some(super::plan::Body::Template(text)) = &r.body {
                scan(text);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::plan::{Item, Request};

    fn plan(requests: &[(&str, &[(&str, &str)])]) -> Plan {
        Plan {
            items: requests
                .iter()
                .map(|(url, headers)| Item {
                    name: "request".into(),
                    tags: Vec::new(),
                    comment: None,
                    step: Step::Request(Request {
                        method: "GET".into(),
                        url: url.to_string(),
                        headers: headers
                            .iter()
                            .map(|(n, v)| (n.to_string(), v.to_string()))
                            .collect(),
                        body: None,
                    }),
                })
                .collect(),
            ..Plan::default()
        }
    }

    fn request(plan: &Plan, i: usize) -> &Request {
        match &plan.items[i].step {
            Step::Request(r) => r,
            Step::Delay(_) => panic!(),
        }
    }

    #[test]
    fn credentials_become_environment_references() {
        let mut p = plan(&[
            (
                "/a?q=1&api_key=k1&access_token=t1",
                &[
                    ("Authorization", "Bearer abc.def"),
                    ("X-API-Key", "k2"),
                    ("Cookie", "sid=s1; theme=dark"),
                    ("Accept", "*/*"),
                ],
            ),
            (
                "/b",
                &[
                    ("authorization", "Bearer abc.def"),
                    ("Proxy-Authorization", "Basic eA=="),
                ],
            ),
            (
                "/c",
                &[("Authorization", "Bearer other"), ("X-Token", "{{ ALREADY }}")],
            ),
        ]);
        keep_out(&mut p);
        let a = request(&p, 0);
        assert_eq!(
            a.url,
            "/a?q=1&api_key={{ API_KEY }}&access_token={{ ACCESS_TOKEN }}"
        );
        assert_eq!(
            a.headers,
            [
                (
                    "Authorization".to_string(),
                    "Bearer {{ AUTHORIZATION }}".to_string()
                ),
                ("X-API-Key".into(), "{{ X_API_KEY }}".into()),
                (
                    "Cookie".into(),
                    "sid={{ COOKIE_SID }}; theme={{ COOKIE_THEME }}".into()
                ),
                ("Accept".into(), "*/*".into()),
            ]
        );
        let b = request(&p, 1);
        assert_eq!(
            b.headers[0].1, "Bearer {{ AUTHORIZATION }}",
            "the same value, the same variable"
        );
        assert_eq!(b.headers[1].1, "Basic {{ PROXY_AUTHORIZATION }}");
        let c = request(&p, 2);
        assert_eq!(c.headers[0].1, "Bearer {{ AUTHORIZATION_2 }}");
        assert_eq!(c.headers[1].1, "{{ ALREADY }}");
        let header = p.header.join("\n");
        for said in [
            "AUTHORIZATION (the Authorization header)",
            "COOKIE_SID (the cookie 'sid')",
            "--keep-secrets",
        ] {
            assert!(header.contains(said), "{said}: {header}");
        }
        let written = format!("{p:?}");
        for secret in ["abc.def", "k1", "k2", "s1", "eA==", "other"] {
            assert!(!written.contains(secret), "{secret}: {written}");
        }
        assert_eq!(referenced(&p)[..3], ["API_KEY", "ACCESS_TOKEN", "AUTHORIZATION"]);
    }
}
