//! Loads one YAML document into marked nodes (every value knows its line),
//! with anchors and aliases resolved, as drill's YAML reader does.
//!
//! marked-yaml's own loader refuses anchors, so this builds the same node
//! types from yaml-rust2's events (the parser marked-yaml itself uses): an
//! `&anchor` keeps a copy of its node and each `*alias` is replaced by that
//! copy. Merge keys (`<<:`) are left as plain keys, as drill's reader leaves
//! them, and refused where keys are checked. Aliases may not expand past
//! [`MAX_EXPANSION`] (a "billion laughs" file stays small in memory).

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, MarkedSequenceNode};
use marked_yaml::{Marker, Node, Span};
use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker as YamlMarker, TScalarStyle};

/// What aliases may add in all, in bytes of text plus `NODE_WEIGHT` per
/// node (about what a node costs in memory).
pub const MAX_EXPANSION: usize = 64 << 20;

const NODE_WEIGHT: usize = 64;

/// A loaded document.
#[derive(Debug)]
pub struct Document {
    pub root: Node,
    /// Where each anchored node starts (character offsets): a key volley
    /// does not know is allowed when it only holds anchors.
    pub anchored: Vec<usize>,
}

/// A YAML problem: its line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub line: usize,
    pub message: String,
}

/// A collection being built.
enum Frame {
    Sequence {
        start: Marker,
        anchor: usize,
        node: MarkedSequenceNode,
    },
    Mapping {
        start: Marker,
        anchor: usize,
        node: MarkedMappingNode,
        key: Option<MarkedScalarNode>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    /// Anchored nodes and their weights, by anchor id.
    anchors: HashMap<usize, (Node, usize)>,
    anchored: Vec<usize>,
    expanded: usize,
    root: Option<Node>,
    error: Option<YamlError>,
}

fn marker(mark: YamlMarker) -> Marker {
    Marker::new(0, mark.index(), mark.line(), mark.col() + 1)
}

/// A node's cost when copied: [`NODE_WEIGHT`] per node plus its text.
fn weight(node: &Node) -> usize {
    NODE_WEIGHT
        + match node {
            Node::Scalar(s) => s.as_str().len(),
            Node::Sequence(seq) => seq.iter().map(weight).sum(),
            Node::Mapping(map) => map
                .iter()
                .map(|(k, v)| NODE_WEIGHT + k.as_str().len() + weight(v))
                .sum(),
        }
}

/// The core schema's own tags (`!!str`, `!!int`...) change nothing here;
/// any other tag names a type drill's files never use.
fn tag_is_plain(tag: &Option<Tag>) -> bool {
    tag.as_ref()
        .is_none_or(|t| t.handle == "!!" || t.handle == "tag:yaml.org,2002:")
}

impl Builder {
    fn fail(&mut self, mark: &Marker, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(YamlError {
                line: mark.line(),
                message: message.into(),
            });
        }
    }

    /// A finished node: remembered under its anchor, put in its parent.
    fn complete(&mut self, node: Node, anchor: usize, mark: &Marker) {
        if anchor != 0 {
            self.anchored.push(mark.character());
            let w = weight(&node);
            self.anchors.insert(anchor, (node.clone(), w));
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Sequence { node: seq, .. }) => seq.push(node),
            Some(Frame::Mapping { node: map, key, .. }) => match key.take() {
                Some(k) => {
                    map.insert(k, node);
                }
                None => match node {
                    Node::Scalar(k) => *key = Some(k),
                    _ => self.fail(mark, "a mapping key must be a single value"),
                },
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: YamlMarker) {
        if self.error.is_some() {
            return;
        }
        let mark = marker(mark);
        match event {
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
            Event::StreamEnd => {
                if self.root.is_none() {
                    // An empty file: an empty mapping, as marked-yaml reads it.
                    self.root = Some(Node::Mapping(MarkedMappingNode::new_empty(Span::new_start(mark))));
                }
            }
            Event::Alias(id) => {
                let Some(w) = self.anchors.get(&id).map(|(_, w)| *w) else {
                    return self.fail(&mark, "an alias names no anchor defined before it");
                };
                self.expanded += w;
                if self.expanded > MAX_EXPANSION {
                    return self.fail(
                        &mark,
                        format!(
                            "aliases expand to more than {} MiB (an alias bomb?)",
                            MAX_EXPANSION >> 20
                        ),
                    );
                }
                let node = self.anchors[&id].0.clone();
                self.complete(node, 0, &mark);
            }
            Event::Scalar(text, style, anchor, tag) => {
                if !tag_is_plain(&tag) {
                    return self.fail(&mark, "YAML tags other than !!str, !!int... are not supported");
                }
                let mut scalar = MarkedScalarNode::new(Span::new_start(mark), text);
                // Only a plain scalar may be a number, a boolean or null
                // (`'10'` is text); plans read every scalar as text, but
                // `volley import` reads OpenAPI documents through here too.
                scalar.set_coerce(style == TScalarStyle::Plain);
                let node = Node::Scalar(scalar);
                self.complete(node, anchor, &mark);
            }
            Event::SequenceStart(anchor, tag) => {
                if !tag_is_plain(&tag) {
                    return self.fail(&mark, "YAML tags other than !!seq are not supported");
                }
                self.stack.push(Frame::Sequence {
                    start: mark,
                    anchor,
                    node: MarkedSequenceNode::new_empty(Span::new_start(mark)),
                });
            }
            Event::MappingStart(anchor, tag) => {
                if !tag_is_plain(&tag) {
                    return self.fail(&mark, "YAML tags other than !!map are not supported");
                }
                self.stack.push(Frame::Mapping {
                    start: mark,
                    anchor,
                    node: MarkedMappingNode::new_empty(Span::new_start(mark)),
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Sequence {
                    start,
                    anchor,
                    mut node,
                }) => {
                    *node.span_mut() = Span::new_with_marks(start, mark);
                    self.complete(Node::Sequence(node), anchor, &start);
                }
                Some(Frame::Mapping {
                    start,
                    anchor,
                    mut node,
                    ..
                }) => {
                    *node.span_mut() = Span::new_with_marks(start, mark);
                    self.complete(Node::Mapping(node), anchor, &start);
                }
                None => self.fail(&mark, "a collection ends that never started"),
            },
        }
    }
}

/// Parses the first YAML document of `text` (a byte-order mark is skipped).
pub fn parse(text: &str) -> Result<Document, YamlError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut builder = Builder::default();
    Parser::new_from_str(text)
        .load(&mut builder, false)
        .map_err(|e| YamlError {
            line: e.marker().line(),
            message: format!(
                "{} at line {} column {}",
                e.info(),
                e.marker().line(),
                e.marker().col() + 1
            ),
        })?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(Document {
        root: builder.root.expect("a finished stream has a root"),
        anchored: builder.anchored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::file::to_json;
    use serde_json::json;

    #[test]
    fn aliases_copy_their_anchored_nodes() {
        let doc = parse("a: &x {k: [1, 2]}\nb: *x\nc: &s text\nd: [*s, *x]\n").unwrap();
        assert_eq!(
            to_json(&doc.root),
            json!({"a": {"k": [1, 2]}, "b": {"k": [1, 2]}, "c": "text", "d": ["text", {"k": [1, 2]}]})
        );
        assert_eq!(doc.anchored.len(), 2);
    }

    #[test]
    fn lines_are_the_file_s_own() {
        let doc = parse("# comment\n---\n\nplan:\n  - name: x\n").unwrap();
        let map = doc.root.as_mapping().unwrap();
        let plan = map.get_node("plan").unwrap();
        assert_eq!(plan.span().start().unwrap().line(), 5);
    }

    #[test]
    fn merge_keys_stay_plain_keys_as_in_drill() {
        let doc = parse("d: &d {u: 1}\ne:\n  <<: *d\n  v: 2\n").unwrap();
        assert_eq!(to_json(&doc.root)["e"], json!({"<<": {"u": 1}, "v": 2}));
    }

    #[test]
    fn an_alias_bomb_is_refused() {
        let mut text =
            String::from("a0: &a0 [xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx]\n");
        for i in 1..40 {
            let p = i - 1;
            text.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("alias bomb"), "{err:?}");
    }

    #[test]
    fn errors_carry_the_line() {
        let err = parse("a: 1\nb: [1,\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        let err = parse("a: *nothing\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        let err = parse("a: !custom 1\n").unwrap_err();
        assert!(err.message.contains("tags"), "{err:?}");
    }
}
