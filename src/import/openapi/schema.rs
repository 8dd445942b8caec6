//! Example values from an OpenAPI document: what a parameter or a body
//! holds when the plan sends it. The description's own `example` or
//! `examples` first, then the `default`, then the first `enum` value (or
//! `const`), then a value made from the schema's type and format, with
//! `$ref`s followed, `allOf` merged and the first `oneOf`/`anyOf` option
//! taken (for a `oneOf`, made to match that option alone, else the first
//! other option that can be).
//! Recursive schemas stop at a depth, as optional properties do sooner.

use super::{Spec, choice};
use crate::import::Problem;
use crate::import::doc::{At, Node};

/// How deep objects and arrays nest in a made-up value.
const MAX_DEPTH: usize = 8;
/// Below this depth, optional properties are left out.
const OPTIONAL_DEPTH: usize = 3;
/// How many of a `oneOf`'s options are tried for a value that matches one
/// alone: each try makes a whole value, and choices nest.
const MAX_TRIED: usize = 8;

/// A value the description gives for `at` (a parameter, a media type or a
/// schema): `example`, else the first of `examples` (an OpenAPI map of
/// example objects, or 3.1's list), else `None`.
pub fn given_example(spec: &Spec<'_>, at: &At<'_>) -> Result<Option<Node>, Problem> {
    if let Some(example) = at.get("example") {
        return Ok(Some(example.node.clone()));
    }
    let Some(examples) = at.get("examples") else {
        return Ok(None);
    };
    match examples.node {
        Node::Array(items) => Ok(items.first().cloned()),
        Node::Object(_) => {
            for (_, example) in examples.members()? {
                let example = spec.resolve(example)?;
                if let Some(value) = example.get("value") {
                    return Ok(Some(value.node.clone()));
                }
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The explicit value of a schema (example, default, enum, const), if any.
pub fn explicit(spec: &Spec<'_>, schema: &At<'_>) -> Result<Option<Node>, Problem> {
    let schema = spec.resolve(schema.clone())?;
    if let Some(example) = given_example(spec, &schema)? {
        return Ok(Some(example));
    }
    if let Some(default) = schema.get("default") {
        return Ok(Some(default.node.clone()));
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(|e| e.node.as_array()?.first().cloned())
    {
        return Ok(Some(first));
    }
    Ok(schema.get("const").map(|c| c.node.clone()))
}

/// A value for `schema`: its explicit one, or one made from its type.
pub fn value(spec: &Spec<'_>, schema: &At<'_>) -> Result<Node, Problem> {
    make(spec, schema, 0)
}

fn make(spec: &Spec<'_>, schema: &At<'_>, depth: usize) -> Result<Node, Problem> {
    let schema = spec.resolve(schema.clone())?;
    if let Some(value) = explicit(spec, &schema)? {
        return Ok(value);
    }
    if let Some(all) = schema.get("allOf") {
        let mut merged: Vec<(String, Node)> = Vec::new();
        let mut other = None;
        for part in all.items()? {
            match make(spec, &part, depth)? {
                Node::Object(members) => {
                    for (key, value) in members {
                        match merged.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, existing)) => *existing = value,
                            None => merged.push((key, value)),
                        }
                    }
                }
                value => other = Some(value),
            }
        }
        // The schema's own properties join those of its parts.
        if schema.get("properties").is_some()
            && let Node::Object(members) = object(spec, &schema, depth)?
        {
            for (key, value) in members {
                if !merged.iter().any(|(m, _)| *m == key) {
                    merged.push((key, value));
                }
            }
        }
        return Ok(match other {
            Some(value) if merged.is_empty() => value,
            _ => Node::Object(merged),
        });
    }
    for choice in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(choice) {
            let options = options.items()?;
            // The first option that is not just `null`.
            let index = options.iter().position(|o| !is_null(spec, o)).unwrap_or(0);
            if let Some(pick) = options.get(index) {
                // A branch that only says which of the object's properties
                // it needs (`anyOf: [{required: [a]}, {required: [b]}]`)
                // is that object with those properties.
                // Properties only the other branches require are left out,
                // so that the object matches one `oneOf` branch, not two.
                let branch = spec.resolve((*pick).clone())?;
                if is_constraint_only(&branch) && type_of(&schema)? == "object" {
                    let wanted = required_of(&branch);
                    let mut others = Vec::new();
                    for option in &options {
                        others.extend(
                            required_of(&spec.resolve(option.clone())?)
                                .into_iter()
                                .filter(|name| !wanted.contains(name)),
                        );
                    }
                    return object_with(spec, &schema, depth, &wanted, &others);
                }
                if choice == "anyOf" {
                    return with_siblings(spec, &schema, pick, depth);
                }
                // A `oneOf`: the first option, then the others, until one
                // gives a value that the other options surely refuse; else
                // the first option's value.
                let others = (0..options.len().min(MAX_TRIED))
                    .filter(|&other| other != index && !is_null(spec, &options[other]));
                let mut first = None;
                for tried in std::iter::once(index).chain(others) {
                    let value = with_siblings(spec, &schema, &options[tried], depth)?;
                    let value = choice::only_one(spec, &schema, &options, tried, value)?;
                    if choice::alone(spec, &options, tried, &value)? {
                        return Ok(value);
                    }
                    first.get_or_insert(value);
                }
                return Ok(first.unwrap_or(Node::Null));
            }
        }
    }
    let kind = type_of(&schema)?;
    Ok(match kind.as_str() {
        "object" => object(spec, &schema, depth)?,
        "array" => {
            if depth >= MAX_DEPTH {
                return Ok(Node::Array(Vec::new()));
            }
            let count = schema
                .get("minItems")
                .and_then(|m| m.node.as_f64())
                .map_or(1, |m| (m as usize).clamp(1, 10));
            match schema.get("items") {
                Some(items) => {
                    let item = make(spec, &items, depth + 1)?;
                    Node::Array(vec![item; count])
                }
                None => Node::Array(Vec::new()),
            }
        }
        "integer" => Node::Number(integer(&schema).into()),
        "number" => {
            let n = number(&schema);
            serde_json::Number::from_f64(n).map_or(Node::Null, Node::Number)
        }
        "boolean" => Node::Bool(true),
        "null" => Node::Null,
        _ => Node::String(string(&schema)),
    })
}

/// Whether a choice's option is just `null`.
fn is_null(spec: &Spec<'_>, option: &At<'_>) -> bool {
    spec.resolve(option.clone())
        .ok()
        .and_then(|o| o.opt_str("type").ok().flatten())
        == Some("null")
}

/// A value for the option `pick` of `schema`'s choice, with the properties
/// `schema` defines beside the choice, which apply too.
fn with_siblings(spec: &Spec<'_>, schema: &At<'_>, pick: &At<'_>, depth: usize) -> Result<Node, Problem> {
    let mut chosen = make(spec, pick, depth)?;
    if let (Node::Object(members), true) = (&mut chosen, schema.get("properties").is_some())
        && let Node::Object(own) = object(spec, schema, depth)?
    {
        for (key, value) in own {
            if !members.iter().any(|(k, _)| *k == key) {
                members.push((key, value));
            }
        }
    }
    Ok(chosen)
}

/// The schema's type: `type` (3.1 may list several: the first not null),
/// else what its keywords imply.
fn type_of(schema: &At<'_>) -> Result<String, Problem> {
    match schema.get("type").map(|t| t.node) {
        Some(Node::String(kind)) => Ok(kind.clone()),
        Some(Node::Array(kinds)) => Ok(kinds
            .iter()
            .filter_map(Node::as_str)
            .find(|k| *k != "null")
            .unwrap_or("null")
            .to_string()),
        Some(other) => {
            Err(schema.problem(format!("'type' must be a string or a list, not {}", other.kind())))
        }
        None if schema.get("properties").is_some() || schema.get("additionalProperties").is_some() => {
            Ok("object".into())
        }
        None if schema.get("items").is_some() => Ok("array".into()),
        None => Ok("string".into()),
    }
}

/// Whether a schema gives no shape of its own, only constraints on the
/// one it is part of (`required`, `minProperties`...).
fn is_constraint_only(schema: &At<'_>) -> bool {
    const SHAPES: [&str; 12] = [
        "type",
        "properties",
        "items",
        "allOf",
        "anyOf",
        "oneOf",
        "enum",
        "const",
        "example",
        "examples",
        "default",
        "additionalProperties",
    ];
    !SHAPES.iter().any(|key| schema.get(key).is_some())
}

/// The names a schema's `required` lists.
fn required_of(schema: &At<'_>) -> Vec<String> {
    schema
        .get("required")
        .and_then(|r| r.node.as_array())
        .map(|r| r.iter().filter_map(Node::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

fn object(spec: &Spec<'_>, schema: &At<'_>, depth: usize) -> Result<Node, Problem> {
    object_with(spec, schema, depth, &[], &[])
}

/// An object for `schema`, with the properties `also` names required as
/// well as its own `required`, and without those `without` names (unless
/// required).
fn object_with(
    spec: &Spec<'_>,
    schema: &At<'_>,
    depth: usize,
    also: &[String],
    without: &[String],
) -> Result<Node, Problem> {
    if depth >= MAX_DEPTH {
        return Ok(Node::Object(Vec::new()));
    }
    let mut required = required_of(schema);
    required.extend(also.iter().cloned());
    let mut members = Vec::new();
    for (name, property) in schema.object("properties")? {
        let property_schema = spec.resolve(property.clone())?;
        if property_schema.opt_bool("readOnly")? == Some(true) {
            continue;
        }
        let is_required = required.iter().any(|r| r == name);
        if (depth >= OPTIONAL_DEPTH || without.iter().any(|w| w == name)) && !is_required {
            continue;
        }
        members.push((name.to_string(), make(spec, &property, depth + 1)?));
    }
    Ok(Node::Object(members))
}

fn bound(schema: &At<'_>, key: &str, exclusive: &str) -> Option<(f64, bool)> {
    // 3.1: `exclusiveMinimum: 5`; 3.0: `minimum: 5, exclusiveMinimum: true`.
    if let Some(n) = schema.get(exclusive).and_then(|e| e.node.as_f64()) {
        return Some((n, true));
    }
    let n = schema.get(key)?.node.as_f64()?;
    let strict = matches!(schema.get(exclusive).map(|e| e.node), Some(Node::Bool(true)));
    Some((n, strict))
}

fn integer(schema: &At<'_>) -> i64 {
    let low = bound(schema, "minimum", "exclusiveMinimum")
        .map(|(n, strict)| n.ceil() as i64 + i64::from(strict && n.fract() == 0.0));
    let high = bound(schema, "maximum", "exclusiveMaximum")
        .map(|(n, strict)| n.floor() as i64 - i64::from(strict && n.fract() == 0.0));
    let mut value = low.unwrap_or(1);
    // `multipleOf`: the first multiple at or above the low bound.
    if let Some(step) = multiple_of(schema).filter(|m| m.fract() == 0.0 && *m >= 1.0) {
        let step = step as i64;
        value = value.div_euclid(step) * step + if value.rem_euclid(step) == 0 { 0 } else { step };
    }
    match high {
        Some(high) if value > high => high,
        _ => value,
    }
}

fn multiple_of(schema: &At<'_>) -> Option<f64> {
    schema.get("multipleOf")?.node.as_f64().filter(|m| *m > 0.0)
}

fn number(schema: &At<'_>) -> f64 {
    let low =
        bound(schema, "minimum", "exclusiveMinimum").map(|(n, strict)| if strict { n + 1.0 } else { n });
    let high =
        bound(schema, "maximum", "exclusiveMaximum").map(|(n, strict)| if strict { n - 1.0 } else { n });
    let mut value = low.unwrap_or(1.5);
    if let Some(step) = multiple_of(schema) {
        value = (value / step).ceil() * step;
    }
    match high {
        Some(high) if value > high => high,
        _ => value,
    }
}

/// A string for the schema's format, fitted to its length bounds.
fn string(schema: &At<'_>) -> String {
    let format = schema.opt_str("format").ok().flatten().unwrap_or("");
    let mut text = match format {
        "date-time" => "2024-01-01T00:00:00Z",
        "date" => "2024-01-01",
        "time" => "12:00:00",
        "email" | "idn-email" => "user@example.com",
        "uuid" => "3fa85f64-5717-4562-b3fc-2c963f66afa6",
        "uri" | "url" | "iri" | "uri-reference" => "https://example.com/",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "byte" => "c3RyaW5n",
        "binary" => "",
        "duration" => "PT1M",
        _ => "string",
    }
    .to_string();
    let length = |key: &str| schema.get(key).and_then(|n| n.node.as_f64()).map(|n| n as usize);
    if let Some(min) = length("minLength") {
        while text.chars().count() < min.min(1024) {
            text.push('x');
        }
    }
    if let Some(max) = length("maxLength") {
        text = text.chars().take(max).collect();
    }
    text
}
