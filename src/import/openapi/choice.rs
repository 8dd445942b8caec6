//! Making a `oneOf` value match exactly one of its branches. A value made
//! from the chosen branch often fits the others too (branches whose
//! properties are all optional, or that share a base through `allOf`), and
//! then a validator refuses it as matching more than one. The chosen
//! branch's discriminator value is filled in, and where another branch
//! would still accept the value, a property only that branch defines is
//! added with a value it refuses, which the chosen branch (not defining it,
//! and not closed to other properties) accepts.
//!
//! The check is a conservative reading of JSON Schema: "refuses" is only
//! said where it is sure (a missing required property, a wrong type, a
//! value outside an enum, a property an object does not allow); where it is
//! not sure, the value is left as made.

use super::Spec;
use crate::import::Problem;
use crate::import::doc::{At, Node};

/// How deep the check follows nested schemas.
const MAX_DEPTH: usize = 16;

/// `value`, made from `options[pick]` of the `oneOf` in `schema`, changed so
/// that the other options refuse it. Left as made where it is not an
/// object or no change is sure to work.
pub fn only_one(
    spec: &Spec<'_>,
    schema: &At<'_>,
    options: &[At<'_>],
    pick: usize,
    value: Node,
) -> Result<Node, Problem> {
    let Node::Object(_) = value else {
        return Ok(value);
    };
    let chosen = &options[pick];
    let mut made = value.clone();
    if let Some(name) = discriminator_value(schema, chosen)
        && let Some(property) = schema
            .get("discriminator")
            .and_then(|d| d.opt_str("propertyName").ok().flatten())
    {
        set(&mut made, property, Node::String(name));
        if refuses(spec, chosen, &made, 0)? {
            made = value.clone();
        }
    }
    if !open_to_others(spec, chosen)? || !open_to_others(spec, schema)? {
        return Ok(if refuses(spec, chosen, &made, 0)? {
            value
        } else {
            made
        });
    }
    let own = defined(spec, chosen, 0)?;
    let beside = defined(spec, schema, 0)?;
    for (index, other) in options.iter().enumerate() {
        if index == pick || refuses(spec, other, &made, 0)? {
            continue;
        }
        for (name, property) in properties(spec, other, 0)? {
            if own.contains(&name) || beside.contains(&name) || made.get(&name).is_some() {
                continue;
            }
            let wrong = [
                Node::Number(0.into()),
                Node::String("0".into()),
                Node::Bool(false),
            ];
            let mut fitted = None;
            for candidate in wrong {
                if refuses(spec, &property, &candidate, 0)? {
                    fitted = Some(candidate);
                    break;
                }
            }
            if let Some(candidate) = fitted {
                set(&mut made, &name, candidate);
                break;
            }
        }
    }
    // What the chosen branch would refuse is no use: the value as made,
    // then, matching more than one branch as it did.
    Ok(if refuses(spec, chosen, &made, 0)? {
        value
    } else {
        made
    })
}

/// Whether every option of a `oneOf` but `pick` surely refuses `value`.
pub fn alone(spec: &Spec<'_>, options: &[At<'_>], pick: usize, value: &Node) -> Result<bool, Problem> {
    for (index, option) in options.iter().enumerate() {
        if index != pick && !refuses(spec, option, value, 0)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The discriminator's value for `chosen`: the key of the mapping that
/// names it, else (no mapping names it) the name of the schema its `$ref`
/// points to, as OpenAPI reads a discriminator without a mapping.
fn discriminator_value(schema: &At<'_>, chosen: &At<'_>) -> Option<String> {
    let discriminator = schema.get("discriminator")?;
    let target = chosen.get("$ref")?.text().ok()?;
    let name = target.rsplit('/').next()?;
    if let Some(mapping) = discriminator.get("mapping")
        && let Ok(entries) = mapping.members()
    {
        for (key, points_to) in entries {
            if let Ok(points_to) = points_to.text()
                && (points_to == target || points_to == name)
            {
                return Some(key.to_string());
            }
        }
    }
    Some(name.to_string())
}

/// Sets `value`'s member `name`, replacing one already there.
fn set(value: &mut Node, name: &str, to: Node) {
    if let Node::Object(members) = value {
        match members.iter_mut().find(|(k, _)| k == name) {
            Some((_, existing)) => *existing = to,
            None => members.push((name.to_string(), to)),
        }
    }
}

/// Whether an object `schema` (and the parts its `allOf` joins) lets other
/// properties than those it defines in.
fn open_to_others(spec: &Spec<'_>, schema: &At<'_>) -> Result<bool, Problem> {
    let schema = spec.resolve(schema.clone())?;
    if matches!(
        schema.get("additionalProperties").map(|a| a.node),
        Some(Node::Bool(false))
    ) || schema.get("unevaluatedProperties").is_some()
        || schema.get("patternProperties").is_some()
    {
        return Ok(false);
    }
    if let Some(all) = schema.get("allOf") {
        for part in all.items()? {
            if !open_to_others(spec, &part)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The properties `schema` defines, its `allOf` parts' included, with
/// their schemas.
fn properties<'a>(spec: &Spec<'a>, schema: &At<'a>, depth: usize) -> Result<Vec<(String, At<'a>)>, Problem> {
    let schema = spec.resolve(schema.clone())?;
    let mut found: Vec<(String, At<'a>)> = Vec::new();
    if depth > MAX_DEPTH {
        return Ok(found);
    }
    if schema.get("properties").is_some() {
        for (name, property) in schema.object("properties")? {
            found.push((name.to_string(), property));
        }
    }
    if let Some(all) = schema.get("allOf") {
        for part in all.items()? {
            found.extend(properties(spec, &part, depth + 1)?);
        }
    }
    Ok(found)
}

/// The names of the properties `schema` defines.
fn defined(spec: &Spec<'_>, schema: &At<'_>, depth: usize) -> Result<Vec<String>, Problem> {
    Ok(properties(spec, schema, depth)?
        .into_iter()
        .map(|(name, _)| name)
        .collect())
}

/// Whether `schema` surely refuses `value`.
fn refuses(spec: &Spec<'_>, schema: &At<'_>, value: &Node, depth: usize) -> Result<bool, Problem> {
    if depth > MAX_DEPTH {
        return Ok(false);
    }
    let schema = spec.resolve(schema.clone())?;
    if let Some(allowed) = schema.get("enum").and_then(|e| e.node.as_array())
        && !allowed.contains(value)
    {
        return Ok(true);
    }
    if let Some(constant) = schema.get("const")
        && constant.node != value
    {
        return Ok(true);
    }
    let nullable = schema.opt_bool("nullable")? == Some(true);
    if let Some(kinds) = schema.get("type")
        && !(nullable && *value == Node::Null)
        && !type_fits(kinds.node, value)
    {
        return Ok(true);
    }
    if let Node::Object(members) = value {
        for required in schema
            .get("required")
            .and_then(|r| r.node.as_array())
            .unwrap_or(&[])
        {
            if let Some(name) = required.as_str()
                && !members.iter().any(|(k, _)| k == name)
            {
                return Ok(true);
            }
        }
        let defined = if schema.get("properties").is_some() {
            schema.object("properties")?
        } else {
            Vec::new()
        };
        let closed = matches!(
            schema.get("additionalProperties").map(|a| a.node),
            Some(Node::Bool(false))
        ) && schema.get("patternProperties").is_none();
        for (name, member) in members {
            match defined.iter().find(|(n, _)| n == name) {
                Some((_, property)) if refuses(spec, property, member, depth + 1)? => return Ok(true),
                None if closed => return Ok(true),
                _ => {}
            }
        }
    }
    if let Some(all) = schema.get("allOf") {
        for part in all.items()? {
            if refuses(spec, &part, value, depth + 1)? {
                return Ok(true);
            }
        }
    }
    for choice in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(choice) {
            let mut all_refuse = true;
            for option in options.items()? {
                all_refuse &= refuses(spec, &option, value, depth + 1)?;
            }
            if all_refuse {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Whether `value` is of a JSON Schema type `kinds` names (one, or a list).
fn type_fits(kinds: &Node, value: &Node) -> bool {
    let fits = |kind: &str| match (kind, value) {
        ("null", Node::Null) | ("boolean", Node::Bool(_)) | ("string", Node::String(_)) => true,
        ("array", Node::Array(_)) | ("object", Node::Object(_)) | ("number", Node::Number(_)) => true,
        ("integer", Node::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    };
    match kinds {
        Node::String(kind) => fits(kind),
        Node::Array(list) => list.iter().filter_map(Node::as_str).any(fits),
        // A type this check does not read refuses nothing.
        _ => true,
    }
}
