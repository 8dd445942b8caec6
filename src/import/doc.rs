//! The documents `volley import` reads (HAR, OpenAPI, Postman, a Postman
//! environment) as one tree, with the place of every value as a JSON
//! pointer, so that every complaint names where it is (`/log/entries/3`).
//!
//! Objects keep their keys in the order written: an OpenAPI document's
//! paths and a schema's properties come out in the author's order
//! (serde_json's own `Value` sorts keys unless a crate-wide feature is
//! turned on, which would change every other JSON value volley builds).
//! JSON is read with serde_json; YAML with the plan reader's loader
//! (anchors and aliases resolved, alias bombs refused), plain scalars
//! typed by YAML 1.2's core schema (`10` a number, `'10'` text).

use super::Problem;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::fmt;

/// A value of the document.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Node>),
    /// Members in the order written.
    Object(Vec<(String, Node)>),
}

impl Node {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Node)]> {
        match self {
            Node::Object(members) => Some(members),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Node::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::String(_) => "a string",
            Node::Array(_) => "a list",
            Node::Object(_) => "an object",
        }
    }

    /// As serde_json's value (key order is then serde_json's).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.clone()),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Node::Object(members) => {
                Value::Object(members.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }

    /// Compact JSON text, keys in the order written.
    pub fn to_json_text(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Node::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(key.as_str()).to_string());
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_json().to_string()),
        }
    }
}

/// A node and where it is in its document.
#[derive(Clone, Debug)]
pub struct At<'a> {
    pub node: &'a Node,
    /// The JSON pointer of `node` ("" is the root).
    pub pointer: String,
}

/// A JSON pointer's escaping of one key (RFC 6901).
pub fn escape_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl<'a> At<'a> {
    pub fn root(node: &'a Node) -> At<'a> {
        At {
            node,
            pointer: String::new(),
        }
    }

    /// Where this is, for messages: the pointer, or `/` for the root.
    pub fn place(&self) -> String {
        if self.pointer.is_empty() {
            "/".into()
        } else {
            self.pointer.clone()
        }
    }

    pub fn problem(&self, message: impl Into<String>) -> Problem {
        Problem::at(self.place(), message)
    }

    fn child(&self, node: &'a Node, key: &str) -> At<'a> {
        At {
            node,
            pointer: format!("{}/{}", self.pointer, escape_key(key)),
        }
    }

    /// The member `key`, if present (a null member counts as absent).
    pub fn get(&self, key: &str) -> Option<At<'a>> {
        match self.node.get(key) {
            None | Some(Node::Null) => None,
            Some(node) => Some(self.child(node, key)),
        }
    }

    /// The member `key`, which must be there.
    pub fn need(&self, key: &str) -> Result<At<'a>, Problem> {
        self.get(key)
            .ok_or_else(|| self.problem(format!("'{key}' is missing")))
    }

    /// This value as text, or a problem naming what it is instead.
    pub fn text(&self) -> Result<&'a str, Problem> {
        self.node
            .as_str()
            .ok_or_else(|| self.problem(format!("must be a string, not {}", self.node.kind())))
    }

    /// The member `key` as text, if present.
    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, Problem> {
        self.get(key).map(|at| at.text()).transpose()
    }

    /// The member `key` as text, which must be there.
    pub fn str(&self, key: &str) -> Result<&'a str, Problem> {
        self.need(key)?.text()
    }

    /// The member `key` as a boolean, if present.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, Problem> {
        match self.get(key) {
            None => Ok(None),
            Some(At {
                node: Node::Bool(b), ..
            }) => Ok(Some(*b)),
            Some(at) => Err(at.problem(format!("must be true or false, not {}", at.node.kind()))),
        }
    }

    /// This value's items, which it must have.
    pub fn items(&self) -> Result<Vec<At<'a>>, Problem> {
        let items = self
            .node
            .as_array()
            .ok_or_else(|| self.problem(format!("must be a list, not {}", self.node.kind())))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, node)| self.child(node, &i.to_string()))
            .collect())
    }

    /// The member `key`'s items; none when it is absent.
    pub fn list(&self, key: &str) -> Result<Vec<At<'a>>, Problem> {
        self.get(key).map_or(Ok(Vec::new()), |at| at.items())
    }

    /// This object's members, which it must have.
    pub fn members(&self) -> Result<Vec<(&'a str, At<'a>)>, Problem> {
        let members = self
            .node
            .as_object()
            .ok_or_else(|| self.problem(format!("must be an object, not {}", self.node.kind())))?;
        Ok(members
            .iter()
            .map(|(k, node)| (k.as_str(), self.child(node, k)))
            .collect())
    }

    /// The member `key`'s members; none when it is absent.
    pub fn object(&self, key: &str) -> Result<Vec<(&'a str, At<'a>)>, Problem> {
        self.get(key).map_or(Ok(Vec::new()), |at| at.members())
    }

    /// The node a pointer (`/components/schemas/Pet`) names from here.
    pub fn pointer(&self, pointer: &str) -> Option<At<'a>> {
        let mut at = self.clone();
        if pointer.is_empty() {
            return Some(at);
        }
        for raw in pointer.strip_prefix('/')?.split('/') {
            let key = raw.replace("~1", "/").replace("~0", "~");
            let key = percent_encoding::percent_decode_str(&key).decode_utf8().ok()?;
            at = match at.node {
                Node::Object(_) => at.child(at.node.get(&key)?, &key),
                Node::Array(items) => at.child(items.get(key.parse::<usize>().ok()?)?, &key),
                _ => return None,
            };
        }
        Some(at)
    }
}

/// Reads a document: JSON when it starts with `{` or `[`, else YAML.
pub fn parse(text: &str) -> Result<Node, Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with(['{', '[']) {
        return parse_json(text);
    }
    let doc = crate::scenario::yaml::parse(text)
        .map_err(|e| Problem::on_line(e.line, format!("not valid YAML: {}", e.message)))?;
    Ok(from_yaml(&doc.root))
}

/// Reads a JSON document.
pub fn parse_json(text: &str) -> Result<Node, Problem> {
    serde_json::from_str(text).map_err(|e| Problem::on_line(e.line(), format!("not valid JSON: {e}")))
}

fn from_yaml(node: &marked_yaml::Node) -> Node {
    match node {
        marked_yaml::Node::Scalar(s) if s.may_coerce() => plain_scalar(s.as_str()),
        marked_yaml::Node::Scalar(s) => Node::String(s.as_str().to_string()),
        marked_yaml::Node::Sequence(seq) => Node::Array(seq.iter().map(from_yaml).collect()),
        marked_yaml::Node::Mapping(map) => Node::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().to_string(), from_yaml(v)))
                .collect(),
        ),
    }
}

/// A plain YAML scalar typed by YAML 1.2's core schema.
fn plain_scalar(text: &str) -> Node {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null,
        "true" | "True" | "TRUE" => return Node::Bool(true),
        "false" | "False" | "FALSE" => return Node::Bool(false),
        _ => {}
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits(unsigned)
        && let Ok(n) = text.trim_start_matches('+').parse::<i64>()
    {
        return Node::Number(n.into());
    }
    let radix = |prefix: &str, radix: u32| {
        text.strip_prefix(prefix)
            .and_then(|d| i64::from_str_radix(d, radix).ok())
    };
    if let Some(n) = radix("0x", 16).or_else(|| radix("0o", 8)) {
        return Node::Number(n.into());
    }
    // A float needs a digit and only float characters: `1e3`, `-2.5`, `.5`.
    let float_chars = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || b"._eE+-".contains(&b));
    if float_chars
        && unsigned.bytes().any(|b| b.is_ascii_digit())
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Node::Number(n);
    }
    Node::String(text.to_string())
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Node, E> {
        Ok(Number::from_f64(f).map_or(Node::Null, Node::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(Node::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Node, E> {
        Ok(Node::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut members = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Node>()? {
            members.push((key, value));
        }
        Ok(Node::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_key_order_and_pointers_name_places() {
        let doc = parse(r#"{"b": 1, "a": {"x/y": [true, null, "s"]}}"#).unwrap();
        let keys: Vec<&str> = doc.as_object().unwrap().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        let root = At::root(&doc);
        let list = root.need("a").unwrap().need("x/y").unwrap();
        assert_eq!(list.pointer, "/a/x~1y");
        let items = list.items().unwrap();
        assert_eq!(items[2].text().unwrap(), "s");
        assert_eq!(
            items[0].text().unwrap_err().to_string(),
            "/a/x~1y/0: must be a string, not a boolean"
        );
        assert_eq!(root.pointer("/a/x~1y/2").unwrap().node, &Node::String("s".into()));
        assert!(root.pointer("/a/nope").is_none());
        assert_eq!(doc.to_json_text(), r#"{"b":1,"a":{"x/y":[true,null,"s"]}}"#);
        assert_eq!(root.need("c").unwrap_err().to_string(), "/: 'c' is missing");
    }

    #[test]
    fn yaml_scalars_are_typed_only_when_plain() {
        let doc = parse(
            "a: 10\nb: '10'\nc: 1e3\nd: yes\ne: ~\nf: true\ng: -2.5\nh: 0x1f\ni: \"true\"\nj: 1.2.3\nk: .5\n",
        )
        .unwrap();
        let get = |k: &str| doc.get(k).unwrap().clone();
        assert_eq!(get("a"), Node::Number(10.into()));
        assert_eq!(get("b"), Node::String("10".into()));
        assert_eq!(get("c").as_f64(), Some(1000.0));
        assert_eq!(get("d"), Node::String("yes".into()), "YAML 1.2: yes is text");
        assert_eq!(get("e"), Node::Null);
        assert_eq!(get("f"), Node::Bool(true));
        assert_eq!(get("g").as_f64(), Some(-2.5));
        assert_eq!(get("h"), Node::Number(31.into()));
        assert_eq!(get("i"), Node::String("true".into()));
        assert_eq!(get("j"), Node::String("1.2.3".into()));
        assert_eq!(get("k").as_f64(), Some(0.5));
    }

    #[test]
    fn bad_documents_say_where() {
        assert_eq!(parse("{\"a\": 1,\n\"b\" 2}").unwrap_err().place, "line 2");
        assert!(
            parse("a: [1\nb: 2\n")
                .unwrap_err()
                .message
                .starts_with("not valid YAML")
        );
    }
}
