//! `/ui/graph`: a node's neighbourhood and blast radius (`GET /v1/graph/neighbors`'s
//! `Engine::neighbors`) — direction, depth, as of a date — drawn on the server as SVG: the node
//! in the middle, each hop on its own ring, every node a link that walks on from it (records
//! also link to their page). `ui.js` adds pan (drag) and zoom (wheel, buttons); without
//! JavaScript the picture and its links work, and the same neighbours are listed as text.
//! Without a node: the clusters of this project (`Engine::clusters`) and the entities.

use super::layout::{html_response, page};
use super::{Form, read_page};
use crate::App;
use crate::api::on_engine;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use cairn_core::graph::NodeKind;
use cairn_engine::graph::{
    ClustersRequest, Direction, EntitiesRequest, NeighborsAnswer, NeighborsRequest, NodeView,
};
use maud::{Markup, html};
use std::collections::HashMap;

/// Radius of one hop's ring, in SVG units.
const RING: f64 = 110.0;

pub(crate) async fn handler(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers, move |app, signed| {
        let form = Form::query(query.as_deref());
        let node = form.get("node").map(str::to_string);
        let direction = match form.get("direction") {
            Some(given) => given.parse::<Direction>()?,
            None => Direction::Both,
        };
        let depth = form
            .get("depth")
            .and_then(|d| d.parse::<u32>().ok())
            .unwrap_or(2)
            .clamp(1, 4);
        let as_of = form.get("as_of").map(str::to_string);
        let body = match &node {
            Some(node) => {
                let mut request = NeighborsRequest::new(node.clone());
                request.direction = direction;
                request.depth = depth;
                request.as_of = as_of.clone();
                request.limit = 60;
                let answer = on_engine(app, &signed.caller, "neighbors", |engine| {
                    Ok(engine.neighbors(&request)?)
                })?;
                neighbourhood(&answer, &form)
            }
            None => {
                        // Clusters read every active record of the project: when asked.
                let with_clusters = form.flag("clusters");
                let (clusters, entities) =
                    on_engine(app, &signed.caller, "clusters", |engine| {
                        Ok((
                            if with_clusters {
                                Some(engine.clusters(&ClustersRequest::default())?)
                            } else {
                                None
                            },
                            engine.entities(&EntitiesRequest {
                                entity_type: None,
                                limit: 50,
                            })?,
                        ))
                    })?;
                html! {
                    section aria-labelledby="clusters-h" {
                        h2 #clusters-h { "Clusters" }
                        @if clusters.is_none() {
                            p { a href="/ui/graph?clusters=1#clusters-h" { "Find the clusters" } " (label propagation over every record of the project: seconds on a large brain)." }
                        }
                        @if let Some(clusters) = &clusters {
                        p.hint { (clusters.records) " records went in; " (clusters.found) " clusters of at least 4." }
                        }
                        @for cluster in clusters.iter().flat_map(|c| c.clusters.iter()) {
                            h3 { "Cluster #" (cluster.id) " (" (cluster.size) ")" }
                            ul {
                                @for member in &cluster.members {
                                    li { a href=(format!("/ui/records/{}", member.id)) { "#" (member.id) " " (member.title) } }
                                }
                            }
                        }
                    }
                    section aria-labelledby="entities-h" {
                        h2 #entities-h { "Entities" }
                        @if entities.is_empty() { p { "No entities yet." } }
                        ul {
                            @for entity in &entities {
                                li {
                                    a href=(walk_url(&entity.name, &form)) { (entity.name) }
                                    " (" (entity.entity_type) ", " (entity.mentions) " mentions)"
                                }
                            }
                        }
                    }
                }
            }
        };
        let content = html! {
            h1 { "Graph" }
            form.grid method="get" action="/ui/graph" {
                label { "Node " input type="text" name="node" value=(node.as_deref().unwrap_or("")) placeholder="#42 or an entity name"; }
                label { "Direction"
                    select name="direction" {
                        @for (value, label) in [("both", "both"), ("in", "in: what breaks if it changes"), ("out", "out: what it depends on")] {
                            option value=(value) selected[form.get("direction").unwrap_or("both") == value] { (label) }
                        }
                    }
                }
                label { "Depth"
                    select name="depth" {
                        @for d in 1..=4u32 { option value=(d) selected[d == depth] { (d) } }
                    }
                }
                label { "As of " input type="text" name="as_of" value=(as_of.as_deref().unwrap_or("")) placeholder="a date, or now"; }
                div { button type="submit" { "Show" } }
            }
            (body)
        };
        Ok(html_response(
            StatusCode::OK,
            page("Graph", Some(signed), "/ui/graph", content),
        ))
    })
    .await
}

/// The graph page walking from `node`, with the form's other settings.
fn walk_url(node: &str, form: &Form) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    serializer.append_pair("node", node);
    for key in ["direction", "depth", "as_of"] {
        if let Some(value) = form.get(key) {
            serializer.append_pair(key, value);
        }
    }
    format!("/ui/graph?{}", serializer.finish())
}

fn key(node: &NodeView) -> (bool, i64) {
    (node.kind == NodeKind::Record, node.id)
}

fn label(node: &NodeView) -> String {
    let text = match (&node.kind, &node.title) {
        (NodeKind::Record, Some(title)) => format!("{} {title}", node.name),
        _ => node.name.clone(),
    };
    let mut short: String = text.chars().take(28).collect();
    if text.chars().count() > 28 {
        short.push('…');
    }
    short
}

/// Positions: the origin at the centre, hop `h` on the ring of radius `h × RING`, each ring's
/// nodes spread evenly, ordered by the angle of the node they were reached from.
fn layout(answer: &NeighborsAnswer) -> HashMap<(bool, i64), (f64, f64, f64)> {
    let mut positions: HashMap<(bool, i64), (f64, f64, f64)> = HashMap::new();
    positions.insert(key(&answer.origin), (0.0, 0.0, 0.0));
    let max_hop = answer.neighbors.iter().map(|n| n.hop).max().unwrap_or(0);
    for hop in 1..=max_hop {
        let mut ring: Vec<&cairn_engine::graph::Neighbor> = answer
            .neighbors
            .iter()
            .filter(|n| n.hop == hop && !positions.contains_key(&key(&n.node)))
            .collect();
        ring.sort_by(|a, b| {
            let angle = |n: &&cairn_engine::graph::Neighbor| {
                positions.get(&key(&n.via)).map_or(0.0, |p| p.2)
            };
            angle(a).total_cmp(&angle(b))
        });
        ring.dedup_by_key(|n| key(&n.node));
        let count = ring.len().max(1) as f64;
        for (index, neighbour) in ring.iter().enumerate() {
            let angle = std::f64::consts::TAU * index as f64 / count - std::f64::consts::FRAC_PI_2
                + hop as f64 * 0.35;
            let radius = RING * f64::from(hop);
            positions.insert(
                key(&neighbour.node),
                (radius * angle.cos(), radius * angle.sin(), angle),
            );
        }
    }
    positions
}

fn node_markup(node: &NodeView, at: (f64, f64), origin: bool, form: &Form) -> Markup {
    let class = match (origin, node.kind) {
        (true, _) => "node origin",
        (false, NodeKind::Record) => "node record",
        (false, NodeKind::Entity) => "node entity",
    };
    html! {
        a href=(walk_url(&node.name, form)) class=(class) {
            title { (node.describe()) }
            circle cx=(format!("{:.1}", at.0)) cy=(format!("{:.1}", at.1)) r=(if origin { "14" } else { "10" }) {}
            text x=(format!("{:.1}", at.0)) y=(format!("{:.1}", at.1 + 26.0)) text-anchor="middle" { (label(node)) }
        }
    }
}

fn neighbourhood(answer: &NeighborsAnswer, form: &Form) -> Markup {
    let positions = layout(answer);
    let max_hop = answer
        .neighbors
        .iter()
        .map(|n| n.hop)
        .max()
        .unwrap_or(0)
        .max(1);
    let half = RING * f64::from(max_hop) + 80.0;
    let at = |node: &NodeView| positions.get(&key(node)).map_or((0.0, 0.0), |p| (p.0, p.1));
    // Each node once (a node reached along two paths is listed twice).
    let mut seen = vec![key(&answer.origin)];
    let mut nodes: Vec<&NodeView> = Vec::new();
    for neighbour in &answer.neighbors {
        if !seen.contains(&key(&neighbour.node)) {
            seen.push(key(&neighbour.node));
            nodes.push(&neighbour.node);
        }
    }
    html! {
        p {
            "From " strong { (answer.origin.describe()) } ": " (answer.reached) " reached, direction "
            (format!("{:?}", answer.direction).to_lowercase()) ", depth " (answer.depth) ", as of " (answer.as_of) "."
            @if answer.truncated { " The walk stopped at its node limit." }
            @if answer.origin.kind == NodeKind::Record {
                " " a href=(format!("/ui/records/{}", answer.origin.id)) { "Open the record" }
            }
        }
        @if let Some(note) = &answer.note { p.hint { (note) } }
        div.graph-tools hidden {
            button.secondary type="button" data-zoom="in" aria-label="Zoom in" { "+" }
            button.secondary type="button" data-zoom="out" aria-label="Zoom out" { "−" }
            button.secondary type="button" data-zoom="reset" { "Reset" }
            span.hint { " Drag to pan, wheel to zoom." }
        }
        svg.graph viewBox=(format!("{:.0} {:.0} {:.0} {:.0}", -half, -half, 2.0 * half, 2.0 * half))
            role="group" aria-label=(format!("The neighbourhood of {}", answer.origin.describe())) {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="20" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse" {
                    path.arrowhead d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            g.edges {
                @for neighbour in &answer.neighbors {
                    @let (from, to) = if neighbour.edge == "out" { (at(&neighbour.via), at(&neighbour.node)) } else { (at(&neighbour.node), at(&neighbour.via)) };
                    line.edge x1=(format!("{:.1}", from.0)) y1=(format!("{:.1}", from.1))
                        x2=(format!("{:.1}", to.0)) y2=(format!("{:.1}", to.1)) marker-end="url(#arrow)" {}
                    text.relation x=(format!("{:.1}", (from.0 + to.0) / 2.0)) y=(format!("{:.1}", (from.1 + to.1) / 2.0 - 4.0)) text-anchor="middle" { (neighbour.relation) }
                }
            }
            g.nodes {
                (node_markup(&answer.origin, (0.0, 0.0), true, form))
                @for node in &nodes {
                    (node_markup(node, at(node), false, form))
                }
            }
        }
        h2 { "Neighbours" }
        @if answer.neighbors.is_empty() { p { "Nothing is connected to it (in this direction, at this date)." } }
        ol {
            @for neighbour in &answer.neighbors {
                li {
                    a href=(walk_url(&neighbour.node.name, form)) { (neighbour.node.describe()) }
                    " — " (neighbour.relation) " " (if neighbour.edge == "out" { "from" } else { "to" }) " "
                    (neighbour.via.describe()) " (hop " (neighbour.hop) ", score " (format!("{:.2}", neighbour.score)) ")"
                }
            }
        }
    }
}
