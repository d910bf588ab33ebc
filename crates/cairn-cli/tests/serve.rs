//! `cairn serve` end to end: the real binary on an ephemeral port, a real HTTP client (ureq),
//! tokens made with `cairn token`. Every refusal of the issue's "bad input, faults and
//! security" list that the server implements is tried here: no token, a wrong, revoked or
//! expired one, another project's record, an oversize body, malformed JSON and a wrong field
//! type, a read-only brain, a read token writing, SIGTERM with an acknowledged write — and the
//! token never showing up in logs, `token list`, events or error bodies.

mod common;

use common::Brain;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

struct Server {
    child: Child,
    url: String,
    /// Everything the server wrote on stderr (read by a thread until it exits).
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(brain: &Brain, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env_remove("CAIRN_PROJECT")
            .env_remove("CAIRN_READ_ONLY")
            .env_remove("CAIRN_NOW")
            .env("CAIRN_EMBEDDER", "none")
            .env("XDG_DATA_HOME", brain.dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("cairn serve starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in the server's first line: {first:?}"))
            .to_string();
        let log = Arc::new(Mutex::new(vec![first]));
        let sink = Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            url,
            log,
            reader: Some(reader),
        }
    }

    /// Sends SIGTERM and waits: the exit code, and everything the server logged.
    fn terminate(self) -> (Option<i32>, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.terminate_wait()
    }

    /// Waits for a server already sent SIGTERM.
    fn terminate_wait(mut self) -> (Option<i32>, String) {
        let exit = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let log = self.log.lock().unwrap().join("\n");
        (exit.code(), log)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// An answer: status, content type, body as JSON (or a string when it is not JSON).
struct Answer {
    status: u16,
    content_type: String,
    body: Value,
    text: String,
}

fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut response = response.expect("the server answers");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
    Answer {
        status,
        content_type,
        body,
        text,
    }
}

fn get(server: &Server, path: &str, token: Option<&str>) -> Answer {
    let mut request = agent().get(format!("{}{path}", server.url));
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    answer(request.call())
}

fn send(server: &Server, method: &str, path: &str, token: Option<&str>, body: &str) -> Answer {
    let url = format!("{}{path}", server.url);
    let agent = agent();
    let mut request = match method {
        "POST" => agent.post(url),
        "PATCH" => agent.patch(url),
        other => panic!("{other}"),
    };
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    answer(
        request
            .header("Content-Type", "application/json")
            .send(body),
    )
}

fn delete(server: &Server, path: &str, token: &str) -> Answer {
    answer(
        agent()
            .delete(format!("{}{path}", server.url))
            .header("Authorization", format!("Bearer {token}"))
            .call(),
    )
}

/// `cairn token create` with `args`; the secret.
fn token(brain: &Brain, args: &[&str]) -> String {
    let mut all = vec!["token", "create"];
    all.extend_from_slice(args);
    let created = brain.json(&all, 0);
    let token = created["token"].as_str().unwrap().to_string();
    assert!(
        token.starts_with("cairn_") && token.len() == 70,
        "{created}"
    );
    token
}

fn assert_problem(answer: &Answer, status: u16) {
    assert_eq!(answer.status, status, "{}", answer.text);
    assert_eq!(
        answer.content_type, "application/problem+json",
        "{}",
        answer.text
    );
    assert_eq!(answer.body["status"], status, "{}", answer.text);
    assert!(
        answer.body["type"]
            .as_str()
            .unwrap()
            .starts_with("urn:cairn:problem:")
    );
    assert!(!answer.body["detail"].as_str().unwrap().is_empty());
}

#[test]
fn health_and_openapi_need_no_token_and_describe_every_endpoint() {
    let brain = Brain::new();
    let server = Server::start(&brain, &[], &[]);
    let health = get(&server, "/healthz", None);
    assert_eq!(health.status, 200, "{}", health.text);
    assert_eq!(health.body["status"], "ok");
    let openapi = get(&server, "/openapi.json", None);
    assert_eq!(openapi.status, 200);
    assert_eq!(openapi.body["openapi"], "3.1.0");
    let paths = openapi.body["paths"].as_object().unwrap();
    for path in [
        "/v1/remember",
        "/v1/recall",
        "/v1/recall/batch",
        "/v1/records/{id}",
        "/v1/records",
        "/v1/brief",
        "/v1/stats",
        "/v1/doctor",
        "/v1/export",
        "/v1/import",
        "/healthz",
    ] {
        assert!(
            paths.contains_key(path),
            "{path} missing from /openapi.json"
        );
    }
    // the request schema is the one the server parses with
    let remember = &paths["/v1/remember"]["post"];
    assert_eq!(
        remember["requestBody"]["content"]["application/json"]["schema"]["required"],
        json!(["type", "body"])
    );
    assert_eq!(remember["x-cairn-role"], "write");
    let missing = get(&server, "/v1/nothing-here", None);
    assert_problem(&missing, 404);
}

#[test]
fn a_project_token_remembers_recalls_and_shows_in_its_project_as_itself() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "ci-bot", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[]);
    let stored = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "gotcha", "title": "Kiln vent", "body": "The kiln vent must be open before firing above cone 6."}"#,
    );
    assert_eq!(stored.status, 200, "{}", stored.text);
    assert_eq!(stored.body["status"], "added");
    let id = stored.body["id"].as_i64().unwrap();

    let recalled = send(
        &server,
        "POST",
        "/v1/recall",
        Some(&writer),
        r#"{"query": "kiln vent firing"}"#,
    );
    assert_eq!(recalled.status, 200, "{}", recalled.text);
    assert_eq!(recalled.body["results"][0]["id"], id, "{}", recalled.text);

    let shown = get(&server, &format!("/v1/records/{id}"), Some(&writer));
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_eq!(
        shown.body["project"], "alpha",
        "the token's project, never named"
    );
    assert_eq!(shown.body["title"], "Kiln vent");

    // the same shape as the CLI's --json (the CLI reads the same brain)
    let cli = brain.json(&["--project", "alpha", "show", &id.to_string()], 0);
    assert_eq!(shown.body, cli);

    let updated = send(
        &server,
        "PATCH",
        &format!("/v1/records/{id}"),
        Some(&writer),
        r#"{"importance": 5}"#,
    );
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["status"], "updated");
    let history = brain.json(
        &["--project", "alpha", "show", &id.to_string(), "--history"],
        0,
    );
    let actors: Vec<&str> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["actor"].as_str().unwrap())
        .collect();
    assert!(
        actors.iter().all(|a| *a == "ci-bot"),
        "the token's name is the actor: {actors:?}"
    );

    let batch = send(
        &server,
        "POST",
        "/v1/recall/batch",
        Some(&writer),
        r#"{"queries": [{"query": "kiln vent"}, {"query": "kiln", "mode": "sideways"}]}"#,
    );
    assert_eq!(batch.status, 200, "{}", batch.text);
    assert_eq!(batch.body["answers"][0]["results"][0]["id"], id);
    assert_eq!(batch.body["answers"][1]["status"], "error");

    let listed = get(&server, "/v1/records?limit=5", Some(&writer));
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body.as_array().unwrap().len(), 1);

    let archived = delete(&server, &format!("/v1/records/{id}"), &writer);
    assert_eq!(archived.body, json!({"status": "archived", "id": id}));
    let restored = send(
        &server,
        "POST",
        &format!("/v1/records/{id}/restore"),
        Some(&writer),
        "",
    );
    assert_eq!(restored.body["status"], "restored", "{}", restored.text);
    let verified = send(
        &server,
        "POST",
        &format!("/v1/records/{id}/verify"),
        Some(&writer),
        r#"{"source": "checked on the kiln"}"#,
    );
    assert_eq!(verified.body["status"], "verified", "{}", verified.text);
    let brief = send(
        &server,
        "POST",
        "/v1/brief",
        Some(&writer),
        r#"{"working_tree": {"branch": "main", "changed": [" M kiln.toml"]}}"#,
    );
    assert_eq!(brief.status, 200, "{}", brief.text);
    assert_eq!(brief.body["project"], "alpha");
}

#[test]
fn missing_wrong_revoked_and_expired_tokens_all_get_the_same_401() {
    let brain = Brain::new();
    let good = token(
        &brain,
        &["--name", "laptop", "--project", "alpha", "--role", "read"],
    );
    let doomed = token(
        &brain,
        &["--name", "doomed", "--project", "alpha", "--role", "read"],
    );
    // made "in 2020", for a day: long expired by the server's clock
    let expired = {
        let output = brain
            .cmd()
            .env("CAIRN_NOW", "2020-01-01T00:00:00Z")
            .args([
                "--json",
                "token",
                "create",
                "--name",
                "old",
                "--all",
                "--role",
                "admin",
                "--expires",
                "1d",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let created: Value = serde_json::from_slice(&output.stdout).unwrap();
        created["token"].as_str().unwrap().to_string()
    };
    let server = Server::start(&brain, &[], &[]);
    assert_eq!(get(&server, "/v1/records", Some(&good)).status, 200);
    assert_eq!(get(&server, "/v1/records", Some(&doomed)).status, 200);

    // revoked while the server runs: effective at once
    let revoked = brain.json(&["token", "revoke", "doomed"], 0);
    assert_eq!(revoked["status"], "revoked");

    let wrong = format!("cairn_{}", "0".repeat(64));
    let mut bodies = Vec::new();
    for presented in [
        None,
        Some(wrong.as_str()),
        Some(doomed.as_str()),
        Some(expired.as_str()),
        Some("not-even-a-token"),
    ] {
        let refused = get(&server, "/v1/records", presented);
        assert_problem(&refused, 401);
        bodies.push(refused.body);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "401s differ: {bodies:?}"
    );
    // a write refused the same way, before its body is looked at
    let refused = send(&server, "POST", "/v1/remember", None, "not json");
    assert_eq!(refused.body, bodies[0]);

    let listed = brain.json(&["token", "list"], 0);
    let states: Vec<(&str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        vec![
            ("laptop", "active"),
            ("doomed", "revoked"),
            ("old", "expired")
        ]
    );
}

#[test]
fn another_projects_record_answers_404_exactly_like_a_missing_one() {
    let brain = Brain::new();
    let alpha = token(
        &brain,
        &[
            "--name",
            "alpha-bot",
            "--project",
            "alpha",
            "--role",
            "write",
        ],
    );
    let beta = token(
        &brain,
        &["--name", "beta-bot", "--project", "beta", "--role", "admin"],
    );
    let server = Server::start(&brain, &[], &[]);
    let stored = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&alpha),
        r#"{"type": "fact", "body": "alpha deploys on Tuesdays"}"#,
    );
    let id = stored.body["id"].as_i64().unwrap();
    let personal = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&alpha),
        r#"{"type": "preference", "body": "answers in short sentences", "personal": true}"#,
    );
    let personal_id = personal.body["id"].as_i64().unwrap();

    let theirs = get(&server, &format!("/v1/records/{id}"), Some(&beta));
    assert_problem(&theirs, 404);
    // a missing record: the same answer but for the number
    let missing_id = id + 1000;
    let missing = get(&server, &format!("/v1/records/{missing_id}"), Some(&beta));
    assert_problem(&missing, 404);
    let mut expected = missing.body.clone();
    expected["detail"] = json!(
        missing.body["detail"]
            .as_str()
            .unwrap()
            .replace(&missing_id.to_string(), &id.to_string())
    );
    assert_eq!(theirs.body, expected);
    // nor can it be changed, archived, verified or superseded from beta
    assert_problem(
        &send(
            &server,
            "PATCH",
            &format!("/v1/records/{id}"),
            Some(&beta),
            r#"{"importance": 1}"#,
        ),
        404,
    );
    assert_problem(
        &delete(&server, &format!("/v1/records/{id}?hard=true"), &beta),
        404,
    );
    assert_problem(
        &send(
            &server,
            "POST",
            &format!("/v1/records/{id}/verify"),
            Some(&beta),
            r#"{"source": "x"}"#,
        ),
        404,
    );
    assert_problem(
        &send(
            &server,
            "POST",
            "/v1/remember",
            Some(&beta),
            &format!(
                r#"{{"type": "fact", "body": "beta deploys on Fridays", "supersedes": {id}}}"#
            ),
        ),
        404,
    );
    // recall from beta does not see it; the personal record is seen from both
    let recalled = send(
        &server,
        "POST",
        "/v1/recall",
        Some(&beta),
        r#"{"query": "alpha deploys Tuesdays"}"#,
    );
    assert_eq!(recalled.body["results"], json!([]), "{}", recalled.text);
    assert_eq!(
        get(&server, &format!("/v1/records/{personal_id}"), Some(&beta)).status,
        200
    );
    // naming another project with the header is a 404 too
    let named = answer(
        agent()
            .get(format!("{}/v1/records", server.url))
            .header("Authorization", format!("Bearer {beta}"))
            .header("Cairn-Project", "alpha")
            .call(),
    );
    assert_problem(&named, 404);
    // and the whole-brain endpoints need a token for every project
    assert_problem(&get(&server, "/v1/export", Some(&beta)), 403);
    assert_eq!(
        get(&server, &format!("/v1/records/{id}"), Some(&alpha)).status,
        200
    );
}

#[test]
fn bad_bodies_get_400_naming_the_field_and_413_with_the_limit() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[]);
    let malformed = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "note", "body": "#,
    );
    assert_problem(&malformed, 400);
    assert!(
        malformed.text.contains("not valid JSON"),
        "{}",
        malformed.text
    );

    let wrong_type = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "note", "body": "x", "importance": "high"}"#,
    );
    assert_problem(&wrong_type, 400);
    assert_eq!(
        wrong_type.body["field"], "importance",
        "{}",
        wrong_type.text
    );

    let unknown = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "note", "body": "x", "colour": "red"}"#,
    );
    assert_problem(&unknown, 400);
    assert!(unknown.text.contains("colour"), "{}", unknown.text);

    let bad_word = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "nonsense", "body": "x"}"#,
    );
    assert_problem(&bad_word, 400);

    let bad_id = get(&server, "/v1/records/abc", Some(&writer));
    assert_problem(&bad_id, 400);
    assert_eq!(bad_id.body["field"], "id");

    let bad_query = get(&server, "/v1/records?limit=many", Some(&writer));
    assert_problem(&bad_query, 400);
    assert_eq!(bad_query.body["field"], "limit", "{}", bad_query.text);

    let big = format!(
        r#"{{"type": "note", "body": "{}"}}"#,
        "a".repeat(1024 * 1024 + 10)
    );
    let too_large = send(&server, "POST", "/v1/remember", Some(&writer), &big);
    assert_problem(&too_large, 413);
    assert_eq!(too_large.body["limit"], 1024 * 1024);
    // nothing was stored by any of them
    assert_eq!(brain.json(&["--project", "alpha", "list"], 0), json!([]));
}

#[test]
fn roles_are_enforced_and_a_read_only_brain_answers_409_with_the_cli_message() {
    let brain = Brain::new();
    let reader = token(
        &brain,
        &["--name", "r", "--project", "alpha", "--role", "read"],
    );
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    {
        let server = Server::start(&brain, &[], &[]);
        let refused = send(
            &server,
            "POST",
            "/v1/remember",
            Some(&reader),
            r#"{"type": "note", "body": "read tokens cannot write"}"#,
        );
        assert_problem(&refused, 403);
        let hard = delete(&server, "/v1/records/1?hard=true", &writer);
        assert_problem(&hard, 403);
    }
    let server = Server::start(&brain, &[], &[("CAIRN_READ_ONLY", "1")]);
    let refused = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "note", "body": "nothing is written here"}"#,
    );
    assert_problem(&refused, 409);
    let cli = brain
        .cmd()
        .env("CAIRN_READ_ONLY", "1")
        .args([
            "remember",
            "--type",
            "note",
            "--body",
            "nothing is written here",
        ])
        .output()
        .unwrap();
    let cli_message = String::from_utf8_lossy(&cli.stderr);
    assert!(
        cli_message.contains(refused.body["detail"].as_str().unwrap()),
        "the CLI says {cli_message:?}, the server {:?}",
        refused.body["detail"]
    );
    assert_eq!(get(&server, "/v1/records", Some(&reader)).status, 200);
}

#[test]
fn sigterm_exits_0_and_keeps_every_acknowledged_write_and_no_token_is_ever_shown() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let admin = token(&brain, &["--name", "root", "--all", "--role", "admin"]);
    let server = Server::start(&brain, &[], &[]);
    let mut ids = Vec::new();
    for n in 0..5 {
        let stored = send(
            &server,
            "POST",
            "/v1/remember",
            Some(&writer),
            &format!(r#"{{"type": "note", "body": "acknowledged write number {n} about glazes"}}"#),
        );
        assert_eq!(stored.status, 200, "{}", stored.text);
        ids.push(stored.body["id"].as_i64().unwrap());
    }
    let mut error_bodies = Vec::new();
    for presented in [writer.as_str(), admin.as_str()] {
        error_bodies.push(
            send(
                &server,
                "POST",
                "/v1/remember",
                Some(presented),
                r#"{"type": 7}"#,
            )
            .text,
        );
        error_bodies.push(get(&server, "/v1/records/999999", Some(presented)).text);
    }
    let export = answer(
        agent()
            .get(format!("{}/v1/export", server.url))
            .header("Authorization", format!("Bearer {admin}"))
            .header("Cairn-Project", "alpha")
            .call(),
    );
    assert_eq!(export.status, 200);
    assert!(export.text.contains("acknowledged write number 4"));
    let (code, log) = server.terminate();
    assert_eq!(code, Some(0), "SIGTERM exits 0; log:\n{log}");
    for id in &ids {
        brain.json(&["--project", "alpha", "show", &id.to_string()], 0);
    }
    let listed = brain.cmd().args(["token", "list"]).output().unwrap();
    let listed_json = brain.json(&["token", "list"], 0).to_string();
    let events = brain.json(&["log", "--limit", "100"], 0).to_string();
    for secret in [&writer, &admin] {
        let hex = &secret["cairn_".len()..];
        for (place, text) in [
            ("the server's log", log.as_str()),
            ("token list", &String::from_utf8_lossy(&listed.stdout)),
            ("token list --json", listed_json.as_str()),
            ("the event log", events.as_str()),
            ("the export", export.text.as_str()),
        ] {
            assert!(!text.contains(hex), "a token secret is in {place}");
        }
        for body in &error_bodies {
            assert!(
                !body.contains(hex),
                "a token secret is in an error body: {body}"
            );
        }
    }
    // the secrets are stored only as their SHA-256
    assert!(
        !brain
            .sql("SELECT hex(secret_hash) FROM service_tokens")
            .is_empty()
    );
}

#[test]
fn mcp_over_http_with_the_official_python_sdk_and_the_same_tokens() {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-test/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is missing: run `bash scripts/setup.sh` (it creates .venv-test/ with the `mcp` package)"
    );
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "agent", "--project", "alpha", "--role", "write"],
    );
    let reader = token(
        &brain,
        &["--name", "viewer", "--project", "alpha", "--role", "read"],
    );
    let server = Server::start(&brain, &[], &[]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_http_client.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(format!("{}/mcp", server.url))
        .arg(&writer)
        .arg(&reader)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    for line in [
        "writer session ok",
        "reader session ok",
        "wrong token refused",
    ] {
        assert!(stdout.contains(line), "{stdout}");
    }
    // the MCP write is filed under the token's project, as the token
    let listed = brain.json(&["--project", "alpha", "list"], 0);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let id = listed[0]["id"].as_i64().unwrap().to_string();
    let shown = brain.json(&["--project", "alpha", "show", &id, "--history"], 0);
    assert_eq!(
        shown["history"][0]["actor"], "agent",
        "the token's name is the actor: {shown}"
    );
}

#[test]
fn a_write_in_flight_at_sigterm_finishes_and_is_kept() {
    use std::io::{Read, Write};
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[]);
    let address = server.url.trim_start_matches("http://").to_string();
    let body = r#"{"type": "fact", "body": "the write in flight at shutdown is kept"}"#;
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /v1/remember HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {writer}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.flush().unwrap();
    // "100 Continue" comes when the handler (past the token check) starts reading the body:
    // from here the write is in flight
    let mut interim = Vec::new();
    let mut byte = [0u8; 1];
    while !interim.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        interim.push(byte[0]);
    }
    assert!(
        interim.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&interim)
    );
    // now stop the server
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !server.log().contains("stopping") {
        assert!(
            std::time::Instant::now() < deadline,
            "no shutdown line: {}",
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // a new connection is refused (the listener is closed)...
    assert!(std::net::TcpStream::connect(&address).is_err());
    // ...while the one in flight is answered
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (code, log) = server.terminate_wait();
    assert_eq!(code, Some(0), "{log}");
    let listed = brain.json(&["--project", "alpha", "list"], 0);
    assert_eq!(listed[0]["body"], "the write in flight at shutdown is kept");
}

#[test]
fn a_locked_brain_answers_503_with_the_cli_message_and_the_write_can_be_retried() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[("CAIRN_BUSY_TIMEOUT_MS", "200")]);
    let body = r#"{"type": "note", "body": "written once the lock is gone"}"#;
    let holder = common::LockHolder::hold(&brain.db);
    let locked = send(&server, "POST", "/v1/remember", Some(&writer), body);
    assert_problem(&locked, 503);
    let cli = brain
        .cmd()
        .env("CAIRN_BUSY_TIMEOUT_MS", "200")
        .args([
            "--project",
            "alpha",
            "remember",
            "--type",
            "note",
            "--body",
            "x",
        ])
        .output()
        .unwrap();
    let cli_message = String::from_utf8_lossy(&cli.stderr);
    let detail = locked.body["detail"].as_str().unwrap();
    assert!(
        cli_message.contains(detail),
        "the CLI says {cli_message:?}, the server {detail:?}"
    );
    holder.release();
    let retried = send(&server, "POST", "/v1/remember", Some(&writer), body);
    assert_eq!(retried.status, 200, "{}", retried.text);
    assert_eq!(retried.body["status"], "added");
}
