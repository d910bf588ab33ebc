//! `/openapi.json`: an OpenAPI 3.1 document built from [`crate::api::endpoints`] (the same list
//! the router is built from) and the request types' JSON Schemas (schemars, draft 2020-12, the
//! dialect OpenAPI 3.1 uses). A success is described by the JSON Schema of the type its handler
//! serializes (the engine's answer structs derive it) and the `--json` shape it carries
//! (docs/cli.md is the contract); errors by the problem document.

use crate::api::Endpoint;
use serde_json::{Map, Value, json};

fn problem_schema() -> Value {
    json!({
        "type": "object",
        "description": "RFC 9457 problem document; `detail` is the message the CLI prints for the same error.",
        "required": ["type", "title", "status", "detail"],
        "properties": {
            "type": {"type": "string", "description": "urn:cairn:problem:<label>"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "field": {"type": "string", "description": "the field, parameter or header that was refused (400)"},
            "limit": {"type": "integer", "description": "the body limit in bytes (413)"}
        }
    })
}

fn problem_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    })
}

fn parameters(endpoint: &Endpoint) -> Vec<Value> {
    let mut parameters = Vec::new();
    if endpoint.path.contains("{id}") {
        let item = if endpoint.path.starts_with("/v1/records/") {
            "The record id (the number in #42)."
        } else {
            "The item's id, as its list gives it."
        };
        parameters.push(json!({
            "name": "id", "in": "path", "required": true,
            "description": item,
            "schema": {"type": "integer", "minimum": 1}
        }));
    }
    if endpoint.path.contains("{dream}") {
        parameters.push(json!({
            "name": "dream", "in": "path", "required": true,
            "description": "The proposal set's id, as `GET /v1/dream` lists it.",
            "schema": {"type": "string"}
        }));
    }
    if endpoint.path.contains("{name}") {
        parameters.push(json!({
            "name": "name", "in": "path", "required": true,
            "description": "The token's name, as `GET /v1/tokens` lists it.",
            "schema": {"type": "string"}
        }));
    }
    if endpoint.path.contains("{key}") {
        parameters.push(json!({
            "name": "key", "in": "path", "required": true,
            "description": "The setting's key (`llm.command`, `capture.extract`, …), as `GET /v1/config` lists them.",
            "schema": {"type": "string"}
        }));
    }
    if let Some(query) = endpoint.query {
        let schema = query();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let mut property = property.clone();
                let description = property
                    .as_object_mut()
                    .and_then(|p| p.remove("description"))
                    .unwrap_or(Value::Null);
                let mut parameter =
                    json!({"name": name, "in": "query", "required": false, "schema": property});
                if !description.is_null() {
                    parameter["description"] = description;
                }
                parameters.push(parameter);
            }
        }
    }
    if endpoint.role.is_some() {
        parameters.push(json!({
            "name": "Cairn-Project", "in": "header", "required": false,
            "description": "The project, for a token of every project (a project token works in its own without it; another project answers 404).",
            "schema": {"type": "string"}
        }));
        parameters.push(json!({
            "name": "Cairn-Commit", "in": "header", "required": false,
            "description": "The client's HEAD commit: stamps gotchas, state and incidents it writes.",
            "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{7,64}$"}
        }));
    }
    parameters
}

fn operation(endpoint: &Endpoint) -> Value {
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": endpoint.answer.1,
            "content": {endpoint.answer.0: {"schema": endpoint.answer_schema.map_or_else(|| json!({}), |schema| schema())}}
        }),
    );
    responses.insert(
        "400".into(),
        problem_response("A malformed body, query, path or header; `field` names it."),
    );
    if endpoint.role.is_some() {
        responses.insert(
            "401".into(),
            problem_response("No token, or a wrong, revoked or expired one."),
        );
        responses.insert(
            "403".into(),
            problem_response(if endpoint.every_project {
                "The token's role does not allow it, or it is a token of one project."
            } else {
                "The token's role does not allow it."
            }),
        );
    }
    if endpoint.path.contains('{') || endpoint.role.is_some() {
        responses.insert(
            "404".into(),
            problem_response(
                "No such record, or one of a project the token does not see (the same answer).",
            ),
        );
    }
    if endpoint.body.is_some() || endpoint.raw_body.is_some() {
        responses.insert(
            "413".into(),
            problem_response("The body is over the server's limit (`limit`, bytes)."),
        );
    }
    responses.insert(
        "409".into(),
        problem_response("Refused: the write needs a decision, or the brain is read-only."),
    );
    responses.insert(
        "503".into(),
        problem_response("The brain is locked by another writer past the busy timeout; retry."),
    );
    let mut operation = json!({
        "summary": endpoint.summary,
        "operationId": format!("{}{}", endpoint.method, endpoint.path.replace(['/', '{', '}'], "_")),
        "parameters": parameters(endpoint),
        "responses": responses,
    });
    if let Some(body) = endpoint.body {
        operation["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": body()}}
        });
    } else if let Some(media) = endpoint.raw_body {
        operation["requestBody"] = json!({
            "required": true,
            "content": {media: {"schema": {"type": "string"}}}
        });
    }
    match endpoint.role {
        Some(role) => {
            operation["security"] = json!([{"bearer": []}]);
            operation["x-cairn-role"] = json!(role.as_str());
            operation["x-cairn-every-project"] = json!(endpoint.every_project);
        }
        None => operation["security"] = json!([]),
    }
    operation
}

/// The whole document.
pub fn document(endpoints: &[Endpoint]) -> Value {
    let mut paths = Map::new();
    for endpoint in endpoints {
        let item = paths
            .entry(endpoint.path.to_string())
            .or_insert_with(|| json!({}));
        item[endpoint.method] = operation(endpoint);
    }
    paths.insert(
        "/healthz".into(),
        json!({"get": {
            "summary": "Liveness, without a token: `{\"status\": \"ok\", \"version\", \"model\"}`.",
            "operationId": "get_healthz",
            "security": [],
            "responses": {"200": {"description": "The server answers.", "content": {"application/json": {"schema": {"type": "object"}}}}}
        }}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "cairn",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "cairn's HTTP API (`cairn serve`): the same operations and JSON shapes as the CLI's `--json` (docs/cli.md); docs/service.md describes auth and deployment."
        },
        "paths": paths,
        "components": {
            "schemas": {"Problem": problem_schema()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "A token from `cairn token create`."}}
        }
    })
}
