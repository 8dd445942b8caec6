//! An operation's security requirement as request fields: each scheme of
//! its first alternative becomes a header field, query parameter or cookie
//! holding a `{{ NAME }}` placeholder, so no secret is written into a plan.

use super::{Notes, Spec};
use crate::import::Problem;
use crate::import::doc::{self, At};
use crate::import::request;

/// The operation's security (its own, else the document's): the first of
/// its alternatives, each scheme as a placeholder the environment fills.
pub(super) fn fields(
    spec: &Spec<'_>,
    op: &At<'_>,
    headers: &mut Vec<(String, String)>,
    query: &mut Vec<(String, String)>,
    cookies: &mut Vec<String>,
    notes: &mut Notes,
) -> Result<(), Problem> {
    let Some(requirements) = op.get("security").or_else(|| spec.root.get("security")) else {
        return Ok(());
    };
    let Some(first) = requirements.items()?.into_iter().next() else {
        return Ok(());
    };
    let schemes_at = if spec.v2 {
        "/securityDefinitions"
    } else {
        "/components/securitySchemes"
    };
    for (name, _) in first.members()? {
        let scheme = spec
            .root
            .pointer(&format!("{schemes_at}/{}", doc::escape_key(name)))
            .ok_or_else(|| {
                first.problem(format!("security scheme '{name}' is not defined in {schemes_at}"))
            })?;
        let scheme = spec.resolve(scheme)?;
        let variable = request::env_name(name);
        let placeholder = format!("{{{{ {variable} }}}}");
        let kind = scheme.str("type")?;
        let what = match kind {
            "http" => {
                let auth = scheme.str("scheme")?;
                let pretty = match auth.to_ascii_lowercase().as_str() {
                    "bearer" => "Bearer".to_string(),
                    "basic" => "Basic".to_string(),
                    _ => auth.to_string(),
                };
                headers.push(("Authorization".into(), format!("{pretty} {placeholder}")));
                if pretty == "Basic" {
                    format!("the base64 of USER:PASSWORD for '{name}'")
                } else {
                    format!("the {pretty} token for '{name}'")
                }
            }
            "basic" => {
                headers.push(("Authorization".into(), format!("Basic {placeholder}")));
                format!("the base64 of USER:PASSWORD for '{name}'")
            }
            "apiKey" => {
                let key = scheme.str("name")?;
                match scheme.str("in")? {
                    "query" => query.push((key.to_string(), placeholder)),
                    "cookie" => cookies.push(format!("{key}={placeholder}")),
                    _ => headers.push((key.to_string(), placeholder)),
                }
                format!("the API key '{name}'")
            }
            "oauth2" | "openIdConnect" => {
                headers.push(("Authorization".into(), format!("Bearer {placeholder}")));
                format!("an access token for '{name}' ({kind})")
            }
            other => {
                return Err(scheme.problem(format!("security scheme type '{other}' is not supported")));
            }
        };
        if !notes.variables.iter().any(|(v, _)| *v == variable) {
            notes.variables.push((variable, what));
        }
    }
    Ok(())
}
