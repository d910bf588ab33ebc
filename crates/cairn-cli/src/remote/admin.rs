//! The brain's upkeep and administration over a server (`maintain`, `maintain --status`,
//! `extract`, `model status`, `token list|create|revoke`, `config list|get`): each handler
//! sends the command's request to its `/v1` endpoint, reads the answer back into the struct the
//! local command prints, and prints it with that command's printer, so stdout and exit codes
//! are the local ones.

use super::Client;
use super::commands::{Remote, read, writable};
use super::graph::urlencoding;
use crate::commands::lifecycle::{self, ConfigCommand, ExtractArgs, MaintainArgs};
use crate::commands::semantic::{ModelStatus, print_model_status};
use crate::commands::serve::{
    TokenCommand, print_token_created, print_token_revoked, print_tokens,
};
use anyhow::Result;
use cairn_engine::lifecycle::{MaintainReport, SettingValue, StepState};
use cairn_engine::tokens::{CreatedToken, TokenInfo};
use cairn_engine::{EngineError, ExtractReport};
use serde_json::json;
use std::process::ExitCode;
use std::time::Duration;

/// How long a maintenance run or an extraction may keep the answer back: they wait for the
/// brain's LLM, bounded by its call budget (`extract.max_llm_calls`, `dream.max_llm_calls`)
/// times `llm.timeout_secs`.
const LONG_RUN: Duration = Duration::from_secs(30 * 60);

/// A client for a write that may run for minutes.
fn long_writer(remote: &Remote<'_>) -> Result<Client> {
    let mut options = remote.options.clone();
    options.read_timeout = LONG_RUN;
    Ok(Client::new(remote.target.clone(), options)?)
}

pub fn maintain(remote: &Remote<'_>, args: &MaintainArgs) -> Result<ExitCode> {
    let settings = remote.settings;
    if args.status {
        let client = remote.client()?;
        let answer = client.get("/v1/maintain")?;
        let steps: Vec<StepState> = read(&client, answer["steps"].clone(), "maintenance steps")?;
        lifecycle::print_maintain_status(settings, &steps);
        return Ok(ExitCode::SUCCESS);
    }
    writable(remote, "maintain")?;
    let client = long_writer(remote)?;
    let answer = client.post("/v1/maintain", &json!({ "session": args.session }))?;
    let report: MaintainReport = read(&client, answer, "a maintenance report")?;
    Ok(lifecycle::print_maintain(settings, &report))
}

pub fn extract(remote: &Remote<'_>, args: &ExtractArgs) -> Result<ExitCode> {
    writable(remote, "extract")?;
    let client = long_writer(remote)?;
    let body = json!({"session": args.session, "no_llm": args.no_llm});
    let answer = client.post("/v1/extract", &body)?;
    let report: ExtractReport = read(&client, answer, "an extraction report")?;
    Ok(lifecycle::print_extract(remote.settings, &report))
}

pub fn model_status(remote: &Remote<'_>) -> Result<ExitCode> {
    let client = remote.client()?;
    let answer = client.get("/v1/semantic")?;
    let status: ModelStatus = read(&client, answer, "a model status")?;
    // The server looked for its model; why it did not find it is in its own status.
    Ok(print_model_status(remote.settings, &status, None))
}

pub fn token(remote: &Remote<'_>, command: &TokenCommand) -> Result<ExitCode> {
    let settings = remote.settings;
    let client = remote.client()?;
    match command {
        TokenCommand::List => {
            let answer = client.get("/v1/tokens")?;
            let tokens: Vec<TokenInfo> = read(&client, answer, "a list of tokens")?;
            print_tokens(settings, &tokens);
        }
        TokenCommand::Create(args) => {
            writable(remote, "token create")?;
            let request = args.request();
            let body = json!({
                "name": request.name,
                "project": request.project,
                "all": request.project.is_none(),
                "role": request.role.as_str(),
                "expires": request.expires,
            });
            let answer = client.post("/v1/tokens", &body)?;
            let created: CreatedToken = read(&client, answer, "a new token")?;
            print_token_created(settings, &created);
        }
        TokenCommand::Revoke { name } => {
            writable(remote, "token revoke")?;
            let answer = client.delete(&format!("/v1/tokens/{}", urlencoding(name)))?;
            let revoked: TokenInfo = read(&client, answer["token"].clone(), "a revoked token")?;
            print_token_revoked(settings, &revoked);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn config(remote: &Remote<'_>, command: &ConfigCommand) -> Result<ExitCode> {
    let settings = remote.settings;
    let client = remote.client()?;
    match command {
        ConfigCommand::List => {
            let answer = client.get("/v1/config")?;
            let stored: Vec<SettingValue> =
                read(&client, answer["settings"].clone(), "the brain's settings")?;
            lifecycle::print_settings(settings, &stored);
        }
        ConfigCommand::Get { key } => {
            let answer = client.get(&format!("/v1/config/{}", urlencoding(key)))?;
            let setting: SettingValue = read(&client, answer, "a setting")?;
            lifecycle::print_setting(settings, &setting);
        }
        ConfigCommand::Set { .. } | ConfigCommand::Unset { .. } => {
            return Err(unserved(
                "config set|unset",
                "a server's settings are changed where the brain is (`llm.command` is a shell command the server runs: no token may set it)",
                "run `cairn config set` on the server's machine, or an environment variable where the server starts (`cairn config list` names them)",
                remote,
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The error of a command a server does not serve, and why (exit 1): nothing was sent and no
/// local brain file was opened.
pub fn unserved(name: &str, why: &str, instead: &str, remote: &Remote<'_>) -> anyhow::Error {
    EngineError::Invalid(format!(
        "`cairn {name}` is not served by a cairn server: {why}; CAIRN_URL is set ({}): nothing was done and no local brain file was opened — {instead}",
        remote.target.display()
    ))
    .into()
}
