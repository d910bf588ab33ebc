//! `/mcp`: the MCP tools over rmcp's Streamable HTTP server transport, stateless (no session
//! outlives a request, so shutdown never waits on one) with JSON answers. The bearer token is
//! checked here, like every `/v1` call; the context it stands for rides in the request's
//! extensions ([`cairn_mcp::CallAs`]) to the tool call, which runs on the shared service.

use crate::auth::authorize;
use crate::problem::Problem;
use crate::{App, Limits};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use cairn_engine::tokens::Role;
use cairn_mcp::{CairnServer, CallAs};
use cairn_service::Service;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

pub type McpService = StreamableHttpService<CairnServer, LocalSessionManager>;

pub fn service(service: Service, limits: Limits, loopback: bool) -> McpService {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(limits.body);
    if !loopback {
        config = config.disable_allowed_hosts();
    }
    StreamableHttpService::new(
        move || Ok(CairnServer::remote(service.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Checks the token (any role may connect; a read token's session refuses every tool that
/// writes), then hands the request to rmcp.
pub async fn endpoint(State(app): State<App>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let checked = {
        let app = app.clone();
        let headers = parts.headers.clone();
        tokio::task::spawn_blocking(move || authorize(&app, &headers, Role::Read, "mcp")).await
    };
    let caller = match checked {
        Ok(Ok(caller)) => caller,
        Ok(Err(problem)) => return problem.into_response(),
        Err(_) => {
            return Problem::from_kind(
                cairn_engine::ErrorKind::Other,
                "the request failed unexpectedly (an internal error); nothing was done",
            )
            .into_response();
        }
    };
    parts.extensions.insert(CallAs {
        read_only: !caller.grant.role.allows(Role::Write),
        request: caller.request,
    });
    let mut mcp = app.mcp.clone();
    match tower_service::Service::call(&mut mcp, Request::from_parts(parts, body)).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}
