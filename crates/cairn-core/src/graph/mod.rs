//! The knowledge graph's pure parts (docs/design.md §7): nodes and relation types, the bi-temporal edge
//! log and its fold, entity extraction, the blast-radius walk and label-propagation clusters.
//!
//! The store keeps an append-only log of `assert` / `invalidate` operations; everything else
//! (the intervals an edge was valid in, the graph at a time, neighbours, clusters) is computed
//! from it by the functions here, which never read a clock or a file.

pub mod blast;
pub mod cluster;
pub mod extract;
pub mod fold;

use serde::{Deserialize, Serialize};
use std::fmt;

/// What an edge endpoint is: a memory record or an entity.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Record,
    Entity,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Record => "record",
            NodeKind::Entity => "entity",
        }
    }

    pub fn parse(text: &str) -> Option<NodeKind> {
        match text {
            "record" => Some(NodeKind::Record),
            "entity" => Some(NodeKind::Entity),
            _ => None,
        }
    }
}

/// A typed reference to a record or an entity. Ordered by kind, then id: records first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct Node {
    pub kind: NodeKind,
    pub id: i64,
}

impl Node {
    pub fn record(id: i64) -> Node {
        Node {
            kind: NodeKind::Record,
            id,
        }
    }

    pub fn entity(id: i64) -> Node {
        Node {
            kind: NodeKind::Entity,
            id,
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            NodeKind::Record => write!(f, "#{}", self.id),
            NodeKind::Entity => write!(f, "entity:{}", self.id),
        }
    }
}

/// A built-in relation type: its name, its weight in the blast radius, and whether it reads the
/// same both ways (a symmetric edge is walked in either direction).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltinRelation {
    pub name: &'static str,
    pub weight: f64,
    pub symmetric: bool,
    pub description: &'static str,
}

/// The relation types every brain knows (docs/design.md §7). `mentions` (record → entity, written by
/// extraction) weighs 0.3: a mention says a record talks about a thing, which is weaker evidence
/// of "breaks if it changes" than any asserted relation, `relates` (0.5) included.
pub const BUILTIN_RELATIONS: &[BuiltinRelation] = &[
    BuiltinRelation {
        name: "requires",
        weight: 1.0,
        symmetric: false,
        description: "A needs B to work",
    },
    BuiltinRelation {
        name: "affects",
        weight: 1.0,
        symmetric: false,
        description: "a change to A changes B",
    },
    BuiltinRelation {
        name: "part_of",
        weight: 0.8,
        symmetric: false,
        description: "A is a part of B",
    },
    BuiltinRelation {
        name: "supersedes",
        weight: 0.6,
        symmetric: false,
        description: "A replaces B (written when a record supersedes another)",
    },
    BuiltinRelation {
        name: "relates",
        weight: 0.5,
        symmetric: true,
        description: "A and B are related (co-occurring entities get a low-confidence one)",
    },
    BuiltinRelation {
        name: "mentions",
        weight: 0.3,
        symmetric: false,
        description: "record A talks about entity B (written by extraction)",
    },
];

/// Weight of a user-declared relation type when the declaration does not give one.
pub const DEFAULT_DECLARED_WEIGHT: f64 = 0.5;

/// Confidence of the `relates` edges extraction writes between co-occurring entities.
pub const COOCCURRENCE_CONFIDENCE: f64 = 0.3;

/// The built-in relation called `name`, if any.
pub fn builtin_relation(name: &str) -> Option<&'static BuiltinRelation> {
    BUILTIN_RELATIONS.iter().find(|r| r.name == name)
}

/// A relation type name as users may type it, or why it cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{given:?} cannot be a relation type: use 1–40 lowercase letters, digits and underscores, starting with a letter (e.g. depends_on)"
)]
pub struct InvalidRelationName {
    pub given: String,
}

/// Normalizes a relation type name: trimmed, lowercased, `-` and spaces become `_`.
pub fn normalize_relation(given: &str) -> Result<String, InvalidRelationName> {
    let name: String = given
        .trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let valid = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(name)
    } else {
        Err(InvalidRelationName {
            given: given.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_names_normalize_or_are_refused() {
        let check = |given: &str, expect: Option<&str>| {
            assert_eq!(
                normalize_relation(given).ok().as_deref(),
                expect,
                "{given:?}"
            );
        };
        check("requires", Some("requires"));
        check(" Part-Of ", Some("part_of"));
        check("depends on", Some("depends_on"));
        check("", None);
        check("2fast", None);
        check("a/b", None);
        check(&"x".repeat(41), None);
    }

    #[test]
    fn nodes_order_records_first_then_by_id() {
        let mut nodes = vec![Node::entity(1), Node::record(9), Node::record(2)];
        nodes.sort();
        assert_eq!(
            nodes,
            vec![Node::record(2), Node::record(9), Node::entity(1)]
        );
        assert_eq!(Node::record(42).to_string(), "#42");
    }

    #[test]
    fn builtin_weights_are_the_designed_ones() {
        let weight = |name| builtin_relation(name).map(|r| r.weight);
        assert_eq!(weight("requires"), Some(1.0));
        assert_eq!(weight("affects"), Some(1.0));
        assert_eq!(weight("part_of"), Some(0.8));
        assert_eq!(weight("supersedes"), Some(0.6));
        assert_eq!(weight("relates"), Some(0.5));
        assert_eq!(weight("mentions"), Some(0.3));
        assert_eq!(weight("owns"), None);
    }
}
