//! The knowledge graph's engine API (docs/design.md §7): what the CLI, the MCP server and the brief
//! call. `relate`, `unrelate`, `neighbors`, `entities`, `graph`, `edges`, `clusters` and
//! `neighbourhood_of_paths` return plain data; writes go through one transaction each.
//!
//! Endpoints are named the way people name them: `#42` or `42` is a record, anything else is
//! an entity's name or alias (normalized by `cairn_core::graph::extract::entity_key`). Records
//! of other projects are invisible here as everywhere else.

mod doctor;
pub(crate) mod exchange;
mod read;
pub(crate) mod recall;
pub(crate) mod write;

pub use read::{
    ClusterMember, ClusterView, ClustersAnswer, ClustersRequest, Direction, EdgesAnswer,
    EntitiesRequest, EntityView, GraphAnswer, GraphRequest, LogView, Neighbor, NeighborsAnswer,
    NeighborsRequest, PathNeighbourhood, RelationCount,
};
pub(crate) use write::sync_code_links;
pub use write::{
    CODE_DEFINED_IN, CODE_USES, COOCCURRENCE_WINDOW, CodeLinks, EntityAdded, RelateOutcome,
    RelateRequest, RelateStatus, UnrelateOutcome, UnrelateStatus,
};

use crate::{EngineError, Result};
use cairn_core::graph::extract::entity_key;
use cairn_core::graph::{Node, NodeKind};
use cairn_store::{EdgeKey, Reader};
use serde::{Deserialize, Serialize};

/// A graph node as shown to people and agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeView {
    pub kind: NodeKind,
    pub id: i64,
    /// The entity's name, or `#42` for a record.
    pub name: String,
    /// The entity's type (`path`, `service`, …) or the record's type (`decision`, …).
    #[serde(rename = "type")]
    pub node_type: String,
    /// A record's title (or the start of its body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A record's status (`active`, `superseded`, `archived`; `deleted` when it is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl NodeView {
    /// One line for humans: `#42 "title"` or `src/main.rs (path)`.
    pub fn describe(&self) -> String {
        match self.kind {
            NodeKind::Record => {
                let mut line = self.name.clone();
                if let Some(title) = &self.title {
                    let short: String = title.chars().take(60).collect();
                    let ellipsis = if title.chars().count() > 60 {
                        "…"
                    } else {
                        ""
                    };
                    line.push_str(&format!(" \"{}{ellipsis}\"", short.replace('\n', " ")));
                }
                if let Some(status) = self.status.as_deref().filter(|s| *s != "active") {
                    line.push_str(&format!(" [{status}]"));
                }
                line
            }
            NodeKind::Entity => format!("{} ({})", self.name, self.node_type),
        }
    }
}

/// An edge (one validity interval of it) as shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EdgeView {
    pub src: NodeView,
    pub relation: String,
    pub dst: NodeView,
    pub valid_from: String,
    pub valid_to: Option<String>,
    pub confidence: f64,
}

impl EdgeView {
    pub(crate) fn from_key(
        reader: &Reader<'_>,
        key: &EdgeKey,
        valid_from: String,
        valid_to: Option<String>,
        confidence: f64,
    ) -> Result<EdgeView> {
        Ok(EdgeView {
            src: node_view(reader, key.src)?,
            relation: key.relation.clone(),
            dst: node_view(reader, key.dst)?,
            valid_from,
            valid_to,
            confidence,
        })
    }

    /// `#12 requires postgres (service)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {}",
            short(&self.src),
            self.relation,
            short(&self.dst)
        )
    }

    /// `src rel dst  [from …, until …, confidence …]`: how `cairn graph`, `cairn edges` and
    /// the MCP graph tools print an edge.
    pub fn line(&self) -> String {
        let mut when = format!("from {}", self.valid_from);
        if let Some(to) = &self.valid_to {
            when.push_str(&format!(" until {to}"));
        }
        if self.confidence < 1.0 {
            when.push_str(&format!(", confidence {:.2}", self.confidence));
        }
        format!(
            "{} {} {}  [{when}]",
            self.src.describe(),
            self.relation,
            self.dst.describe()
        )
    }
}

fn short(node: &NodeView) -> String {
    match node.kind {
        NodeKind::Record => node.name.clone(),
        NodeKind::Entity => node.name.clone(),
    }
}

/// How a node is shown; a node whose row is gone still shows (as deleted / unknown).
pub(crate) fn node_view(reader: &Reader<'_>, node: Node) -> Result<NodeView> {
    Ok(match node.kind {
        NodeKind::Record => match reader.record_node(node.id)? {
            Some((_, status, record_type, title)) => NodeView {
                kind: node.kind,
                id: node.id,
                name: format!("#{}", node.id),
                node_type: record_type,
                title: Some(title.split_whitespace().collect::<Vec<_>>().join(" ")),
                status: Some(status),
            },
            None => NodeView {
                kind: node.kind,
                id: node.id,
                name: format!("#{}", node.id),
                node_type: "record".into(),
                title: None,
                status: Some("deleted".into()),
            },
        },
        NodeKind::Entity => match reader.entity(node.id)? {
            Some(entity) => NodeView {
                kind: node.kind,
                id: node.id,
                name: entity.name,
                node_type: entity.entity_type,
                title: None,
                status: None,
            },
            None => NodeView {
                kind: node.kind,
                id: node.id,
                name: format!("entity:{}", node.id),
                node_type: "unknown".into(),
                title: None,
                status: None,
            },
        },
    })
}

pub(crate) fn endpoint_text(reader: &Reader<'_>, node: Node) -> Result<String> {
    Ok(short(&node_view(reader, node)?))
}

/// `#42` / `42` → the record's number.
pub(crate) fn record_number(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('#').unwrap_or(text);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Resolves what a user typed to a node: a record (visible from `project` when given) or an
/// entity by name or alias. `None` when nothing is called that.
pub(crate) fn resolve_endpoint(
    reader: &Reader<'_>,
    text: &str,
    project: Option<&str>,
) -> Result<Option<Node>> {
    let text = text.trim();
    if text.is_empty() {
        return Err(EngineError::Invalid(
            "an edge end is empty: give a record (#42) or an entity name".into(),
        ));
    }
    if let Some(id) = record_number(text) {
        return Ok(match reader.record_node(id)? {
            Some((record_project, ..))
                if project.is_none_or(|p| record_project.is_empty() || record_project == p) =>
            {
                Some(Node::record(id))
            }
            _ => None,
        });
    }
    let key = entity_key(text);
    if key.is_empty() {
        return Ok(None);
    }
    Ok(reader.entity_by_key(&key)?.map(|e| Node::entity(e.id)))
}

/// The error for a name that resolves to nothing, on a read.
pub(crate) fn unresolved(text: &str) -> EngineError {
    let text = text.trim();
    match record_number(text) {
        Some(id) => EngineError::Invalid(format!(
            "no record #{id} in this brain (or it belongs to another project)"
        )),
        None => EngineError::Invalid(format!(
            "nothing in this brain is called {text:?}: not a record id, and no entity has that name or alias — `cairn entities` lists them"
        )),
    }
}
