//! `/v1/tokens…`, `/v1/config…` and `/v1/semantic`: the brain's own administration as the CLI
//! does it (`cairn token list|create|revoke`, `cairn config list|get`, `cairn model status`),
//! answering each command's `--json`.
//!
//! Tokens are an admin's, and only with a token for every project: a project's admin could
//! otherwise make a token for every project. A made token's secret is in that one answer and
//! never again (only its hash is stored); a revocation is effective at once, since every
//! request reads its token from the brain. Settings are the brain's as the server's
//! environment overrides them, readable with a token for every project; they are not changed
//! over HTTP (`llm.command` is a shell command the server runs: a token must not be able to
//! set it).

use super::{Endpoint, Input, NoQuery, Op, handle};
use crate::App;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{delete, get, post};
use cairn_engine::SemanticStatus;
use cairn_engine::lifecycle::SettingValue;
use cairn_engine::tokens::{CreatedToken, NewToken, Role, TokenInfo};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::PathBuf;

/// `POST /v1/tokens`: the flags of `cairn token create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreateBody {
    /// Who uses it (the actor recorded in events and history).
    pub name: String,
    /// The one project it works in; leave it out with `all`.
    #[serde(default)]
    pub project: Option<String>,
    /// Every project (the client names it with the `Cairn-Project` header).
    #[serde(default)]
    pub all: bool,
    /// read, write or admin.
    pub role: String,
    /// When it stops working: an age ahead (30d, 12h) or a date; never when absent.
    #[serde(default)]
    pub expires: Option<String>,
}

impl TokenCreateBody {
    fn request(self) -> Result<NewToken, Problem> {
        let field = |name: &str, why: String| {
            Problem::bad_request(format!("{why}; no token was made")).with("field", json!(name))
        };
        let role = Role::parse(self.role.trim()).ok_or_else(|| {
            field(
                "role",
                format!("`role` {:?} is not read, write or admin", self.role),
            )
        })?;
        let project = match (self.project, self.all) {
            (Some(_), true) => {
                return Err(field(
                    "project",
                    "`project` and `all` exclude each other: one project, or every project".into(),
                ));
            }
            (None, false) => {
                return Err(field(
                    "project",
                    "give `project` (the one project it works in) or `all: true` (every project)"
                        .into(),
                ));
            }
            (project, _) => project,
        };
        Ok(NewToken {
            name: self.name,
            project,
            role,
            expires: self.expires,
        })
    }
}

/// `DELETE /v1/tokens/{name}` (`cairn token revoke --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RevokedAnswer {
    /// `revoked`.
    pub status: &'static str,
    pub token: TokenInfo,
}

/// `GET /v1/config` (`cairn config list --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SettingsAnswer {
    pub settings: Vec<SettingValue>,
}

/// `GET /v1/semantic` (`cairn model status --json`): the server's embedder and the brain's
/// semantic index, members in the order the CLI prints them.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SemanticAnswer {
    /// Why the server's embedder configuration is invalid, when it is.
    pub config_error: Option<String>,
    /// Where the server found the local model.
    pub model_dir: Option<PathBuf>,
    /// Semantic search works.
    pub ok: bool,
    /// local, http, none, hash or invalid (`unknown` when the server was not told).
    pub provider: String,
    pub semantic: Option<SemanticStatus>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

async fn token_list(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::admin("token list").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.token_list()?),
    )
    .await
}

async fn token_create(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::admin("token create").whole_brain(),
        Input::Body(body),
        |engine, _, args: TokenCreateBody| Ok(engine.token_create(&args.request()?)?),
    )
    .await
}

async fn token_revoke(
    State(app): State<App>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::admin("token revoke").whole_brain(),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            Ok(RevokedAnswer {
                status: "revoked",
                token: engine.token_revoke(&name)?,
            })
        },
    )
    .await
}

async fn config_list(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("config list").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| {
            Ok(SettingsAnswer {
                settings: engine.settings(&env)?,
            })
        },
    )
    .await
}

async fn config_get(
    State(app): State<App>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("config get").whole_brain(),
        Input::Nothing,
        move |engine, _, _: NoQuery| Ok(engine.setting(&key, &env)?),
    )
    .await
}

async fn semantic(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    let setup = app.service.options().embedder_setup.clone();
    let model = app.service.embedder_state();
    handle(
        app,
        headers,
        Op::read("model status").whole_brain(),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            let mut status = engine.semantic_status()?;
            let configured = setup.as_ref().is_some_and(|s| s.provider != "none");
            match model {
                // The engine has no embedder until the background load hands it over.
                None => {
                    status.problem = Some(
                        "the server is still loading its embedding model: recall is lexical-only until it is resident; ask again in a moment".into(),
                    );
                }
                Some(false) if configured => {
                    status.problem = Some(
                        "the server's embedding model did not load (the server's log says why): recall is lexical-only — fix the model where the server runs (`cairn model install` there) and restart it".into(),
                    );
                }
                Some(_) => {}
            }
            let ok = status.problem.is_none();
            Ok(match setup {
                Some(setup) => SemanticAnswer {
                    config_error: setup.config_error,
                    model_dir: setup.model_dir,
                    ok,
                    provider: setup.provider,
                    semantic: Some(status),
                },
                None => SemanticAnswer {
                    config_error: None,
                    model_dir: None,
                    ok,
                    provider: "unknown".into(),
                    semantic: Some(status),
                },
            })
        },
    )
    .await
}

pub fn endpoints() -> Vec<Endpoint> {
    let admin = Some(Role::Admin);
    let read = Some(Role::Read);
    vec![
        Endpoint::new(
            "get",
            "/v1/tokens",
            admin,
            "Every token, without secrets (`cairn token list`).",
            get(token_list),
        )
        .every_project()
        .answers::<Vec<TokenInfo>>("the JSON of `cairn token list --json`"),
        Endpoint::new(
            "post",
            "/v1/tokens",
            admin,
            "Make a token (`cairn token create`): its secret is in this answer only, never stored and never shown again.",
            post(token_create),
        )
        .every_project()
        .body::<TokenCreateBody>()
        .answers::<CreatedToken>("the JSON of `cairn token create --json`"),
        Endpoint::new(
            "delete",
            "/v1/tokens/{name}",
            admin,
            "Revoke a token by name (`cairn token revoke`), at once for every server on this brain.",
            delete(token_revoke),
        )
        .every_project()
        .answers::<RevokedAnswer>("the JSON of `cairn token revoke --json`"),
        Endpoint::new(
            "get",
            "/v1/config",
            read,
            "Every setting of the brain with its value and where it comes from — the server's environment, the brain, the default (`cairn config list`).",
            get(config_list),
        )
        .every_project()
        .answers::<SettingsAnswer>("the JSON of `cairn config list --json`"),
        Endpoint::new(
            "get",
            "/v1/config/{key}",
            read,
            "One setting's value and where it comes from (`cairn config get`).",
            get(config_get),
        )
        .every_project()
        .answers::<SettingValue>("the JSON of `cairn config get --json`"),
        Endpoint::new(
            "get",
            "/v1/semantic",
            read,
            "The server's embedder and how complete the brain's semantic index is (`cairn model status`).",
            get(semantic),
        )
        .every_project()
        .answers::<SemanticAnswer>("the JSON of `cairn model status --json`"),
    ]
}
