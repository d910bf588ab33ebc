//! The CLI over a server. [`route`] is the table: one line per command a server answers (its
//! handler below builds the request, sends it, and prints the answer with the printer the local
//! command uses, so stdout and exit codes are the same), the commands that need no brain and
//! run here as they would anyway, and — by default — every other command, refused: with a
//! server configured, cairn never falls back to a local file behind the user's back.
//!
//! What the server cannot know comes with the request: the project (`Cairn-Project`, when
//! `--project`/`CAIRN_PROJECT` names one), the commit a write is stamped with (`Cairn-Commit`,
//! the client's HEAD: one `git rev-parse`, for writes only) and, for `brief`, the working tree.

use super::admin::{self, unserved};
use super::{Client, ClientOptions, RemoteError, Target, agent, graph};
use crate::cli::Command;
use crate::commands::agent::{AgentCommand, BriefArgs, print_brief_text};
use crate::commands::exchange::ExchangeCommand;
use crate::commands::exchange::export::{ExportArgs, print_exported, write_export};
use crate::commands::exchange::import::{ImportArgs, ImportSource, open_input, print_import};
use crate::commands::graph::{EntityCommand, GraphCommand, RelationTypeCommand};
use crate::commands::lifecycle::LifecycleCommand;
use crate::commands::maintenance::{MaintenanceCommand, print_doctor, print_stats};
use crate::commands::recall::{self, RecallArgs};
use crate::commands::records::{self, ListArgs, RecordsCommand, RememberArgs, UpdateArgs};
use crate::commands::semantic::{ModelCommand, SemanticCommand};
use crate::output::print_json;
use crate::settings::{RemoteSettings, Settings};
use anyhow::{Context as _, Result};
use cairn_engine::{EngineError, ErrorKind, RecallAnswer, RecallRequest, RememberOutcome};
use serde_json::{Value, json};
use std::io::{BufRead, Read as _};
use std::process::ExitCode;

/// A command's server, as its handler sees it.
#[derive(Debug)]
pub struct Remote<'a> {
    pub settings: &'a Settings,
    pub target: Target,
    /// The options every request starts from (token, project, timeouts).
    pub options: ClientOptions,
    /// The local daemon (crate::daemon): git is asked in the caller's directory by the daemon
    /// itself, so the client sends its directory instead of a commit.
    pub local: bool,
}

impl Remote<'_> {
    /// A client for a read.
    pub fn client(&self) -> Result<Client, RemoteError> {
        Client::new(self.target.clone(), self.options.clone())
    }

    /// A client for a write: its records are stamped with the client's HEAD commit.
    pub fn writer(&self) -> Result<Client, RemoteError> {
        let mut options = self.options.clone();
        if !self.local
            && let Ok(cwd) = std::env::current_dir()
        {
            options.commit = cairn_engine::git::head_commit(&cwd);
        }
        Client::new(self.target.clone(), options)
    }
}

type Handler<'a> = Box<dyn FnOnce(&Remote<'_>) -> Result<ExitCode> + 'a>;

/// How a command runs when the brain is a server's.
pub enum Route<'a> {
    /// The server answers it.
    Server(Handler<'a>),
    /// It needs no brain (or is a server itself): it runs as it would without one.
    Here,
    /// No endpoint answers it.
    Missing,
}

fn server<'a>(handler: impl FnOnce(&Remote<'_>) -> Result<ExitCode> + 'a) -> Route<'a> {
    Route::Server(Box::new(handler))
}

/// The table: what a server does for each command.
pub fn route(command: &Command) -> Route<'_> {
    use AgentCommand as A;
    use ExchangeCommand as E;
    use GraphCommand as G;
    use LifecycleCommand as L;
    use MaintenanceCommand as M;
    use RecordsCommand as R;
    match command {
        Command::Records(R::Remember(args)) => server(move |r| remember(r, args)),
        Command::Records(R::Recall(args)) => server(move |r| recall(r, args)),
        Command::Records(R::Show { id, history }) => server(move |r| show(r, *id, *history)),
        Command::Records(R::Update(args)) => server(move |r| update(r, args)),
        Command::Records(R::Forget { id, hard }) => server(move |r| forget(r, *id, *hard)),
        Command::Records(R::Restore { id }) => server(move |r| restore(r, *id)),
        Command::Records(R::Verify { id, source }) => server(move |r| verify(r, *id, source)),
        Command::Records(R::List(args)) => server(move |r| list(r, args)),
        Command::Agent(A::Brief(args)) => server(move |r| brief(r, args)),
        Command::Agent(A::Review { stale_days }) => server(move |r| agent::review(r, *stale_days)),
        Command::Agent(A::Inbox { command }) => server(move |r| agent::inbox(r, command.as_ref())),
        Command::Agent(A::Task { command }) => server(move |r| agent::task(r, command)),
        Command::Agent(A::Measure { command }) => server(move |r| agent::measure(r, command)),
        Command::Agent(A::Log(args)) => server(move |r| agent::log(r, args)),
        Command::Agent(A::Identity { command }) => server(move |r| agent::identity(r, command)),
        Command::Agent(A::Awareness { command }) => server(move |r| agent::awareness(r, command)),
        Command::Graph(G::Relate(args)) => server(move |r| graph::relate(r, args)),
        Command::Graph(G::Unrelate(args)) => server(move |r| graph::unrelate(r, args)),
        Command::Graph(G::Graph(args)) => server(move |r| graph::graph(r, args)),
        Command::Graph(G::Edges(args)) => server(move |r| graph::edges(r, args)),
        Command::Graph(G::Neighbors(args)) => server(move |r| graph::neighbors(r, args)),
        Command::Graph(G::Entities(args)) => server(move |r| graph::entities(r, args)),
        Command::Graph(G::Entity {
            command:
                EntityCommand::Add {
                    name,
                    entity_type,
                    aliases,
                },
        }) => server(move |r| graph::entity_add(r, name, entity_type, aliases)),
        Command::Graph(G::Entity {
            command: EntityCommand::Relink,
        }) => server(graph::relink),
        Command::Graph(G::RelationType {
            command: RelationTypeCommand::List,
        }) => server(graph::relation_types),
        Command::Graph(G::RelationType {
            command:
                RelationTypeCommand::Declare {
                    name,
                    weight,
                    symmetric,
                    description,
                },
        }) => server(move |r| {
            graph::declare_relation_type(r, name, *weight, *symmetric, description.as_deref())
        }),
        Command::Graph(G::Clusters(args)) => server(move |r| graph::clusters(r, args)),
        Command::Lifecycle(L::Decay(args)) => server(move |r| graph::decay(r, args)),
        Command::Lifecycle(L::Dream(args)) => server(move |r| graph::dream(r, args)),
        Command::Maintenance(M::Stats) => server(stats),
        Command::Maintenance(M::Doctor {
            repair,
            recover_into: None,
        }) => server(move |r| doctor(r, *repair)),
        Command::Exchange(E::Export(args)) if args.target.is_none() => {
            server(move |r| export(r, args))
        }
        Command::Exchange(E::Import(args)) if args.source.is_none() => {
            server(move |r| import(r, args))
        }
        Command::Lifecycle(L::Maintain(args)) => server(move |r| admin::maintain(r, args)),
        Command::Lifecycle(L::Extract(args)) => server(move |r| admin::extract(r, args)),
        Command::Lifecycle(L::Config { command }) => server(move |r| admin::config(r, command)),
        Command::Semantic(SemanticCommand::Model {
            command: ModelCommand::Status,
        }) => server(admin::model_status),
        Command::Token { command } => server(move |r| admin::token(r, command)),
        Command::Mcp => server(super::mcp::forward),
        // Inherently local work: each says why, and what to do instead.
        Command::Semantic(SemanticCommand::Reindex { .. }) => server(|r| {
            Err(unserved(
                "reindex",
                "a server's background indexer embeds the records waiting for a vector by itself, and a full re-embedding belongs on the server's machine (it takes its cores for minutes)",
                "`cairn model status` says how complete the server's index is; run `cairn reindex --full` where the brain is",
                r,
            ))
        }),
        Command::Exchange(E::Export(args)) if args.target.is_some() => server(|r| {
            Err(unserved(
                "export wiki",
                "the wiki is written into a directory on this machine, rewriting only the pages that differ from the files there",
                "`cairn export FILE` (served) writes the brain's JSONL here; then, with CAIRN_URL unset, `cairn --db NEW.db import FILE` and `cairn --db NEW.db export wiki DIR` make the wiki from it",
                r,
            ))
        }),
        Command::Exchange(E::Import(ImportArgs {
            source: Some(source),
            ..
        })) => server(move |r| Err(unserved_import(source, r))),
        Command::Exchange(E::Share(_)) => server(|r| {
            Err(unserved(
                "share",
                "no endpoint makes an envelope yet",
                "run `cairn share` where the brain is; the envelope it writes imports anywhere (`cairn import envelope FILE`, with a local brain)",
                r,
            ))
        }),
        Command::Codemap(_) => server(|r| {
            Err(unserved(
                "codemap",
                "the code map parses the working tree of this machine's repository, which a server cannot read",
                "unset CAIRN_URL to build the map in a local brain file (`cairn brief` through the server still sends the working tree)",
                r,
            ))
        }),
        // The hooks decide for themselves (they fail open within their deadline).
        // `cairn ui` serves the local brain whatever CAIRN_URL says.
        Command::Install(_)
        | Command::Migrate(_)
        | Command::Eval { .. }
        | Command::Serve(_)
        | Command::Ui(_)
        | Command::Hook(_) => Route::Here,
        Command::Semantic(SemanticCommand::Model {
            command: ModelCommand::Install { .. },
        }) => Route::Here,
        _ => Route::Missing,
    }
}

/// Why `import SOURCE` is not served: each source is files on this machine.
fn unserved_import(source: &ImportSource, remote: &Remote<'_>) -> anyhow::Error {
    let (name, why) = match source {
        ImportSource::Wiki(_) => (
            "import wiki",
            "a wiki import compares a directory on this machine with the brain page by page (edits become updates, deleted pages are reported)",
        ),
        ImportSource::ClaudeMd { .. } => (
            "import claude-md",
            "it reads CLAUDE.md files on this machine",
        ),
        ImportSource::AgentsMd { .. } => (
            "import agents-md",
            "it reads AGENTS.md files on this machine",
        ),
        ImportSource::McpMemory { .. } => (
            "import mcp-memory",
            "it reads a memory.jsonl on this machine",
        ),
        ImportSource::Markdown { .. } => (
            "import markdown",
            "it reads a folder of notes on this machine",
        ),
        ImportSource::Mem0 { .. } => ("import mem0", "it reads a mem0 export on this machine"),
        ImportSource::Envelope { .. } => (
            "import envelope",
            "it reads an envelope file on this machine, and no endpoint receives one yet",
        ),
    };
    unserved(
        name,
        why,
        "with CAIRN_URL unset, import it into a local brain file (`cairn --db NEW.db import …`) and `cairn --db NEW.db export FILE`; then `cairn import FILE` through the server (served: JSONL)",
        remote,
    )
}

/// The server `CAIRN_URL` names, as commands see it.
pub fn configured<'a>(
    settings: &'a Settings,
    remote: &RemoteSettings,
) -> Result<Remote<'a>, RemoteError> {
    let target = Target::parse(&remote.url)?;
    let mut options = ClientOptions::new(remote.token.clone());
    options.project = settings.project.clone();
    Ok(Remote {
        settings,
        target,
        options,
        local: false,
    })
}

/// The error of a command no endpoint answers while `CAIRN_URL` is set (exit 1).
pub fn no_endpoint(name: &str, remote: &RemoteSettings) -> anyhow::Error {
    let at = Target::parse(&remote.url)
        .map(|t| t.display())
        .unwrap_or_else(|_| "a server".into());
    EngineError::Invalid(format!(
        "`cairn {name}` is not served by a cairn server, and CAIRN_URL is set ({at}): nothing was done and no local brain file was opened — unset CAIRN_URL to run it on a local brain file"
    ))
    .into()
}

/// `path?query` (nothing after `?` when every pair is empty).
pub(super) fn with_query(path: &str, pairs: &[(&str, String)]) -> String {
    let pairs: Vec<&(&str, String)> = pairs.iter().filter(|(_, v)| !v.is_empty()).collect();
    if pairs.is_empty() {
        return path.to_string();
    }
    let query = serde_urlencoded::to_string(pairs).unwrap_or_default();
    format!("{path}?{query}")
}

/// A value as its JSON spelling (the vocabularies serialize as their names).
fn spelled<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// An answer read back as the struct the local command prints.
pub(super) fn read<T: serde::de::DeserializeOwned>(
    client: &Client,
    answer: Value,
    what: &str,
) -> Result<T> {
    serde_json::from_value(answer).with_context(|| {
        format!(
            "the answer of the server at {} is not {what} as this cairn reads it (a server of another version?)",
            client.target().display()
        )
    })
}

/// Refuses a write before anything is sent when this process is read-only (`CAIRN_READ_ONLY`,
/// or inside an LLM call cairn started): the token may allow it, this process does not. The
/// error is the one a local brain gives.
pub(super) fn writable(remote: &Remote<'_>, operation: &'static str) -> Result<()> {
    if remote.settings.read_only {
        return Err(EngineError::ReadOnly { operation }.into());
    }
    Ok(())
}

fn remember(remote: &Remote<'_>, args: &RememberArgs) -> Result<ExitCode> {
    writable(remote, "remember")?;
    let body =
        records::read_text(args.body.as_ref(), args.body_file.as_deref())?.ok_or_else(|| {
            EngineError::Invalid(
                "no body: give --body TEXT, --body-file FILE or --body - (stdin)".into(),
            )
        })?;
    let request = json!({
        "type": spelled(&args.memory_type),
        "body": body,
        "title": args.title,
        "summary": args.summary,
        "scope": args.scope,
        "tags": args.tags,
        "importance": args.importance,
        "confidence": args.confidence.as_ref().map(spelled),
        "source": args.source,
        "supersedes": args.supersedes,
        "fork_ok": args.fork_ok,
        "allow_duplicate": args.allow_duplicate,
        "pinned": args.pin,
        "trust_zone": args.trust_zone.as_ref().map(spelled),
        "sensitivity": args.sensitivity.as_ref().map(spelled),
        "review": args.review,
        "no_review": args.no_review,
        "expires_at": args.expires,
        "external_id": args.external_id,
        "at": args.at,
        "personal": args.personal,
    });
    let client = remote.writer()?;
    let outcome: RememberOutcome = match client.post("/v1/remember", &request) {
        Ok(answer) => read(&client, answer, "a remember outcome")?,
        // A refused write is an answer like any other (exit 3), carried in the problem.
        Err(error) if error.kind == ErrorKind::Refused && error.member("outcome").is_some() => {
            let outcome = error.member("outcome").cloned().unwrap_or_default();
            read(&client, outcome, "a remember outcome")?
        }
        Err(error) => return Err(error.into()),
    };
    Ok(records::print_remember(remote.settings, &outcome))
}

/// `POST /v1/recall`'s body for a request.
fn recall_body(request: &RecallRequest) -> Value {
    json!({
        "query": request.query,
        "limit": request.limit,
        "scope": request.scope,
        "type": request.types.iter().map(spelled).collect::<Vec<_>>(),
        "all": request.all,
        "no_touch": !request.touch,
        "as_of": request.as_of,
        "since": request.since,
        "until": request.until,
        "mode": spelled(&request.mode),
        "floor": request.floor,
        "zone": request.zone.as_ref().map(spelled),
    })
}

/// The most queries one `POST /v1/recall/batch` carries (the server's limit).
const BATCH: usize = 100;

fn recall(remote: &Remote<'_>, args: &RecallArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let Some(batch) = &args.batch else {
        let answer = client.post("/v1/recall", &recall_body(&recall::single_request(args)))?;
        let answer: RecallAnswer = read(&client, answer, "a recall answer")?;
        recall::print_recall(remote.settings, &answer);
        return Ok(ExitCode::SUCCESS);
    };
    recall::run_batch(args, batch, BATCH, |requests| {
        let mut answers: Vec<Option<Result<RecallAnswer, String>>> = Vec::new();
        let mut queries = Vec::new();
        for request in requests {
            if request.project.is_some() {
                // The token (or `Cairn-Project`) says which project a server answers for.
                answers.push(Some(Err(
                    "a query line's `project` is not available through a server: its project is the token's (or --project); nothing was searched".into(),
                )));
            } else {
                answers.push(None);
                queries.push(recall_body(request));
            }
        }
        if queries.is_empty() {
            return Ok(answers.into_iter().flatten().collect());
        }
        let answer = client.post("/v1/recall/batch", &json!({ "queries": queries }))?;
        let mut served = answer
            .get("answers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter();
        Ok(answers
            .into_iter()
            .map(|slot| match slot {
                Some(refused) => refused,
                None => match served.next() {
                    Some(one) if one.get("status").and_then(Value::as_str) == Some("error") => {
                        Err(one["error"]
                            .as_str()
                            .unwrap_or("the query failed")
                            .to_string())
                    }
                    Some(one) => serde_json::from_value(one)
                        .map_err(|e| format!("the server's answer is not a recall answer ({e})")),
                    None => Err("the server sent no answer for this query".to_string()),
                },
            })
            .collect())
    })
}

fn show(remote: &Remote<'_>, id: i64, history: bool) -> Result<ExitCode> {
    let path = with_query(
        &format!("/v1/records/{id}"),
        &[(
            "history",
            if history {
                "true".into()
            } else {
                String::new()
            },
        )],
    );
    let document = remote.client()?.get(&path)?;
    records::print_show(remote.settings, &document, history)?;
    Ok(ExitCode::SUCCESS)
}

fn update(remote: &Remote<'_>, args: &UpdateArgs) -> Result<ExitCode> {
    writable(remote, "update")?;
    let body = records::read_text(args.body.as_ref(), None)?;
    let pinned = match (args.pin, args.unpin) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    };
    let mut request = serde_json::Map::new();
    let mut set = |key: &str, value: Value| {
        if !value.is_null() {
            request.insert(key.to_string(), value);
        }
    };
    set("title", json!(args.title));
    set("body", json!(body));
    set("summary", json!(args.summary));
    set("tags", json!(args.tags));
    set("importance", json!(args.importance));
    set("confidence", json!(args.confidence.as_ref().map(spelled)));
    set("source", json!(args.source));
    set("type", json!(args.memory_type.as_ref().map(spelled)));
    set("pinned", json!(pinned));
    set("review", json!(args.review));
    set("expires", json!(args.expires));
    let answer = remote
        .writer()?
        .patch(&format!("/v1/records/{}", args.id), &Value::Object(request))?;
    records::print_updated(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

fn forget(remote: &Remote<'_>, id: i64, hard: bool) -> Result<ExitCode> {
    writable(remote, "forget")?;
    let path = with_query(
        &format!("/v1/records/{id}"),
        &[("hard", if hard { "true".into() } else { String::new() })],
    );
    let answer = remote.client()?.delete(&path)?;
    records::print_forgotten(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

fn restore(remote: &Remote<'_>, id: i64) -> Result<ExitCode> {
    writable(remote, "restore")?;
    let answer = remote
        .client()?
        .post_empty(&format!("/v1/records/{id}/restore"))?;
    records::print_restored(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

fn verify(remote: &Remote<'_>, id: i64, source: &str) -> Result<ExitCode> {
    writable(remote, "verify")?;
    let answer = remote.client()?.post(
        &format!("/v1/records/{id}/verify"),
        &json!({ "source": source }),
    )?;
    records::print_verified(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

fn list(remote: &Remote<'_>, args: &ListArgs) -> Result<ExitCode> {
    let types: Vec<String> = args.types.iter().map(|t| t.as_str().to_string()).collect();
    let path = with_query(
        "/v1/records",
        &[
            ("type", types.join(",")),
            ("scope", args.scope.clone().unwrap_or_default()),
            (
                "status",
                args.status
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
            ),
            ("limit", args.limit.to_string()),
            (
                "all_projects",
                if args.all_projects {
                    "true".into()
                } else {
                    String::new()
                },
            ),
        ],
    );
    let client = remote.client()?;
    let answer = client.get(&path)?;
    let memories: Vec<cairn_core::memory::Memory> = read(&client, answer, "a list of records")?;
    records::print_list(remote.settings, &memories);
    Ok(ExitCode::SUCCESS)
}

fn brief(remote: &Remote<'_>, args: &BriefArgs) -> Result<ExitCode> {
    let working_tree = std::env::current_dir()
        .ok()
        .and_then(|cwd| cairn_engine::git::working_tree(&cwd));
    let request = json!({
        "budget": args.budget,
        "sections": args.sections.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "working_tree": working_tree,
    });
    let client = remote.client()?;
    let text = client.json_text(ureq::http::Method::POST, "/v1/brief", Some(&request))?;
    // The brief's JSON is printed in the order the server wrote it: the order of the struct
    // `--json` prints locally.
    let answer = crate::ojson::Json::parse(&text)
        .with_context(|| format!("the brief from {} is not JSON", client.target().display()))?;
    if remote.settings.json {
        print_json(&answer);
    } else {
        print_brief_text(
            answer
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or_default(),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn stats(remote: &Remote<'_>) -> Result<ExitCode> {
    let client = remote.client()?;
    let answer = client.get("/v1/stats")?;
    let stats: cairn_store::Stats = read(&client, answer, "brain statistics")?;
    print_stats(remote.settings, &client.target().display(), &stats);
    Ok(ExitCode::SUCCESS)
}

fn doctor(remote: &Remote<'_>, repair: bool) -> Result<ExitCode> {
    let client = remote.client()?;
    let answer = if repair {
        writable(remote, "doctor --repair")?;
        client.post_empty("/v1/doctor/repair")?
    } else {
        client.get("/v1/doctor")?
    };
    let report: cairn_engine::DoctorReport = read(&client, answer, "a doctor report")?;
    Ok(print_doctor(remote.settings, &report))
}

fn export(remote: &Remote<'_>, args: &ExportArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let lines = write_export(&args.file, |out| {
        let mut reader = std::io::BufReader::new(client.get_reader("/v1/export")?);
        let mut lines = 0;
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line).with_context(|| {
                format!(
                    "the export from {} broke off after {lines} lines; nothing was kept",
                    client.target().display()
                )
            })?;
            if read == 0 {
                break;
            }
            out.write_all(&line)?;
            lines += 1;
        }
        Ok(lines)
    })?;
    print_exported(remote.settings, &args.file, lines);
    Ok(ExitCode::SUCCESS)
}

fn import(remote: &Remote<'_>, args: &ImportArgs) -> Result<ExitCode> {
    writable(remote, "import")?;
    let file = args
        .file
        .as_deref()
        .ok_or_else(|| EngineError::Invalid("no input: give FILE (or - for stdin)".into()))?;
    let mut bytes = Vec::new();
    open_input(file)?
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {file}"))?;
    let client = remote.writer()?;
    let answer = client.send_bytes(
        ureq::http::Method::POST,
        "/v1/import",
        "application/x-ndjson",
        &bytes,
    )?;
    let report: cairn_engine::exchange::ImportReport = read(&client, answer, "an import report")?;
    // The server's indexer embeds what was imported, in the background: nothing was embedded
    // by this process (`embedding` is null, as without an embedder).
    Ok(print_import(remote.settings, &report, None))
}
