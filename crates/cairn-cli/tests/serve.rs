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
        Server::spawn(
            brain,
            Command::new(assert_cmd::cargo::cargo_bin("cairn")),
            args,
            env,
        )
    }

    /// `cairn serve` run through `program` (the binary itself, or a shell that execs it).
    fn spawn(brain: &Brain, mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> Server {
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env("CAIRN_DAEMON", "off")
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
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
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
        "PUT" => agent.put(url),
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

/// `POST /v1/brief` hands the brief to an agent as `cairn brief` and MCP's `brief` do: what it
/// shows is marked surfaced (`surfaced_at`, never `use_count`) — except for a read-only token,
/// whose calls write nothing.
#[test]
fn the_http_brief_marks_what_it_shows_as_surfaced_unless_the_token_only_reads() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "ci-bot", "--project", "alpha", "--role", "write"],
    );
    let reader = token(
        &brain,
        &["--name", "viewer", "--project", "alpha", "--role", "read"],
    );
    let stored = brain.json(
        &[
            "--project",
            "alpha",
            "remember",
            "--type",
            "preference",
            "--pin",
            "--body",
            "answers use metric units and ISO dates throughout",
        ],
        0,
    );
    let id = stored["id"].as_i64().unwrap();
    let show = || brain.json(&["--project", "alpha", "show", &id.to_string()], 0);
    assert!(show()["surfaced_at"].is_null());
    let server = Server::start(&brain, &[], &[]);

    let read = send(&server, "POST", "/v1/brief", Some(&reader), "{}");
    assert_eq!(read.status, 200, "{}", read.text);
    assert!(read.text.contains(&format!("#{id}")), "{}", read.text);
    assert!(
        show()["surfaced_at"].is_null(),
        "a read-only token's brief marks nothing"
    );

    let written = send(&server, "POST", "/v1/brief", Some(&writer), "{}");
    assert_eq!(written.status, 200, "{}", written.text);
    assert!(written.text.contains(&format!("#{id}")), "{}", written.text);
    let record = show();
    assert!(record["surfaced_at"].is_string(), "{record}");
    assert_eq!(record["use_count"], 0, "{record}");
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
        common::succeeded(&output);
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

/// By default recall's access records are buffered in the server (docs/service.md): SIGTERM
/// writes them before the process exits.
#[test]
fn buffered_recall_access_counts_survive_a_graceful_shutdown() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[]);
    let stored = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&writer),
        r#"{"type": "note", "body": "the kiln cools for twelve hours"}"#,
    );
    assert_eq!(stored.status, 200, "{}", stored.text);
    let id = stored.body["id"].as_i64().unwrap();
    for _ in 0..3 {
        let found = send(
            &server,
            "POST",
            "/v1/recall",
            Some(&writer),
            r#"{"query": "kiln cools", "mode": "lexical"}"#,
        );
        assert_eq!(found.status, 200, "{}", found.text);
        assert_eq!(found.body["results"][0]["id"], id, "{}", found.text);
        assert!(found.body.get("warnings").is_none(), "{}", found.text);
    }
    let (code, log) = server.terminate();
    assert_eq!(code, Some(0), "SIGTERM exits 0; log:\n{log}");
    let shown = brain.json(&["--project", "alpha", "show", &id.to_string()], 0);
    assert_eq!(shown["use_count"], 3, "{shown}");
    assert!(shown["last_accessed_at"].is_string(), "{shown}");
    let recalls = brain.sql("SELECT count(*) FROM events WHERE op = 'recall'");
    assert_eq!(recalls.trim(), "3", "one recall event per recall");
}

/// Buffered access records reach the file within about a second while the server runs, and
/// `--no-buffer-accesses` writes each recall's before it answers.
#[test]
fn access_records_are_written_within_a_second_or_at_once_without_buffering() {
    for (args, at_once) in [(&[][..], false), (&["--no-buffer-accesses"][..], true)] {
        let brain = Brain::new();
        let writer = token(
            &brain,
            &["--name", "w", "--project", "alpha", "--role", "write"],
        );
        let server = Server::start(&brain, args, &[]);
        let stored = send(
            &server,
            "POST",
            "/v1/remember",
            Some(&writer),
            r#"{"type": "note", "body": "the glaze needs a second firing"}"#,
        );
        assert_eq!(stored.status, 200, "{}", stored.text);
        let id = stored.body["id"].as_i64().unwrap();
        let found = send(
            &server,
            "POST",
            "/v1/recall",
            Some(&writer),
            r#"{"query": "glaze firing", "mode": "lexical"}"#,
        );
        assert_eq!(found.status, 200, "{}", found.text);
        assert_eq!(found.body["results"][0]["id"], id, "{}", found.text);
        let uses = || {
            brain
                .sql(&format!("SELECT use_count FROM memories WHERE id = {id}"))
                .trim()
                .to_string()
        };
        if at_once {
            assert_eq!(uses(), "1", "written before the answer");
        } else {
            // Generous: the flusher writes within a second; allow a loaded machine ten.
            let started = std::time::Instant::now();
            while uses() != "1" {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(10),
                    "the buffered access was never written"
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        let (code, log) = server.terminate();
        assert_eq!(code, Some(0), "SIGTERM exits 0; log:\n{log}");
        assert_eq!(uses(), "1");
    }
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

/// Remembers from many clients at once are committed in groups; a server killed (SIGKILL, no
/// shutdown) in the middle of them has kept every remember it answered 200, and nothing
/// refused a near-duplicate pair only one of which is stored.
#[test]
fn every_acknowledged_remember_survives_a_kill_in_the_middle_of_concurrent_writes() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let mut server = Server::start(&brain, &[], &[]);
    let acknowledged = Arc::new(Mutex::new(Vec::<(i64, String)>::new()));
    let clients: Vec<_> = (0..8)
        .map(|client| {
            let (url, writer, acknowledged) =
                (server.url.clone(), writer.clone(), Arc::clone(&acknowledged));
            std::thread::spawn(move || {
                let agent = agent();
                for n in 0..40 {
                    let body = format!(
                        "client {client} write {n}: the {} service keeps its {} replica {} in zone {}",
                        ["billing", "search", "ledger", "mail"][n % 4],
                        ["primary", "standby"][client % 2],
                        client * 100 + n,
                        n * 7 + client
                    );
                    let sent = agent
                        .post(format!("{url}/v1/remember"))
                        .header("Authorization", format!("Bearer {writer}"))
                        .header("Content-Type", "application/json")
                        .send(json!({"type": "fact", "body": body, "allow_duplicate": true}).to_string());
                    let Ok(mut response) = sent else {
                        return; // the server is gone
                    };
                    let text = response.body_mut().read_to_string().unwrap_or_default();
                    if response.status().as_u16() != 200 {
                        // Cut off mid-answer by the kill: not acknowledged.
                        assert!(text.is_empty(), "{text}");
                        return;
                    }
                    let Ok(outcome) = serde_json::from_str::<Value>(&text) else {
                        return;
                    };
                    let id = outcome["id"].as_i64().unwrap();
                    acknowledged.lock().unwrap().push((id, body));
                }
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while acknowledged.lock().unwrap().len() < 60 {
        assert!(std::time::Instant::now() < deadline, "{}", server.log());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    for client in clients {
        client.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 60);
    let listed = brain.json(&["--project", "alpha", "list", "--limit", "1000"], 0);
    let stored: std::collections::BTreeMap<i64, String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_i64().unwrap(),
                m["body"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (id, body) in &acknowledged {
        assert_eq!(stored.get(id), Some(body), "#{id} was acknowledged");
    }
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

/// The CLI's `--json` of `args` in project `alpha`.
fn cli(brain: &Brain, args: &[&str]) -> Value {
    let mut all = vec!["--project", "alpha"];
    all.extend_from_slice(args);
    brain.json(&all, 0)
}

#[test]
fn tasks_measures_log_identity_awareness_review_and_inbox_answer_the_cli_json() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let admin = token(&brain, &["--name", "root", "--all", "--role", "admin"]);
    let server = Server::start(&brain, &[], &[]);

    // tasks
    let added = send(
        &server,
        "POST",
        "/v1/tasks",
        Some(&writer),
        r#"{"title": "rotate the deploy key", "due": "2099-01-01"}"#,
    );
    assert_eq!(added.status, 200, "{}", added.text);
    assert_eq!(added.body["project"], "alpha");
    let task = added.body["id"].as_i64().unwrap();
    assert_eq!(
        get(&server, "/v1/tasks", Some(&writer)).body,
        cli(&brain, &["task", "list"])
    );
    let done = send(
        &server,
        "POST",
        &format!("/v1/tasks/{task}/done"),
        Some(&writer),
        "",
    );
    assert_eq!(done.body["status"], "done", "{}", done.text);
    assert_eq!(get(&server, "/v1/tasks", Some(&writer)).body, json!([]));
    assert_eq!(
        get(&server, "/v1/tasks?all=true", Some(&writer)).body,
        cli(&brain, &["task", "list", "--all"])
    );
    assert_problem(
        &send(&server, "POST", "/v1/tasks/9999/done", Some(&writer), ""),
        404,
    );

    // measures
    for value in ["95", "80"] {
        let recorded = send(
            &server,
            "POST",
            "/v1/measures",
            Some(&writer),
            &format!(r#"{{"name": "suite-seconds", "value": {value}, "unit": "s"}}"#),
        );
        assert_eq!(recorded.status, 200, "{}", recorded.text);
    }
    let measures = get(&server, "/v1/measures?name=suite-seconds", Some(&writer));
    assert_eq!(measures.body[0]["trend"], "falling", "{}", measures.text);
    assert_eq!(
        measures.body,
        cli(&brain, &["measure", "show", "suite-seconds"])
    );
    let wrong = send(
        &server,
        "POST",
        "/v1/measures",
        Some(&writer),
        r#"{"name": "suite-seconds", "value": "fast"}"#,
    );
    assert_problem(&wrong, 400);
    assert_eq!(wrong.body["field"], "value");

    // awareness
    let aware = send(
        &server,
        "POST",
        "/v1/awareness",
        Some(&writer),
        r#"{"text": "deploy freeze", "expires": "2099-01-01"}"#,
    );
    assert_eq!(aware.status, 200, "{}", aware.text);
    assert_eq!(aware.body["dropped"], Value::Null);
    let item = aware.body["item"]["id"].as_i64().unwrap();
    assert_eq!(
        get(&server, "/v1/awareness", Some(&writer)).body,
        cli(&brain, &["awareness", "list"])
    );
    let dropped = answer(
        agent()
            .delete(format!("{}/v1/awareness/{item}", server.url))
            .header("Authorization", format!("Bearer {writer}"))
            .call(),
    );
    assert_eq!(dropped.body, json!({"id": item, "dropped": true}));
    assert_eq!(get(&server, "/v1/awareness", Some(&writer)).body, json!([]));

    // identity: one for the brain, so only a token for every project sets it
    assert_eq!(
        get(&server, "/v1/identity", Some(&writer)).body,
        Value::Null
    );
    assert_problem(
        &send(
            &server,
            "PUT",
            "/v1/identity",
            Some(&writer),
            r#"{"text": "the kiln's assistant"}"#,
        ),
        403,
    );
    let set = answer(
        agent()
            .put(format!("{}/v1/identity", server.url))
            .header("Authorization", format!("Bearer {admin}"))
            .header("Cairn-Project", "alpha")
            .header("Content-Type", "application/json")
            .send(r#"{"text": "the kiln's assistant"}"#),
    );
    assert_eq!(set.body["body"], "the kiln's assistant", "{}", set.text);
    assert_eq!(
        get(&server, "/v1/identity", Some(&writer)).body,
        cli(&brain, &["identity", "show"])
    );

    // review
    assert_eq!(
        get(&server, "/v1/review", Some(&writer)).body,
        cli(&brain, &["review"])
    );
    assert_eq!(
        get(&server, "/v1/review?stale_days=0", Some(&writer)).body,
        cli(&brain, &["review", "--stale-days", "0"])
    );

    // the inbox (filled behind cairn's back, as a transcript capture would)
    brain.sql(
        "INSERT INTO inbox (project, kind, suggested_type, body, content_hash, source, created_at) VALUES \
         ('alpha', 'decision', 'decision', 'We fire the kiln on Fridays only.', 'h1', 'transcript of session s1', '2026-12-01T00:00:00Z'), \
         ('alpha', 'remember', 'fact', 'The glaze shelf is the top one.', 'h2', 'transcript of session s1', '2026-12-01T00:00:00Z'), \
         ('beta', 'remember', 'fact', 'Beta keeps its clay wet.', 'h3', 'transcript of session s2', '2026-12-01T00:00:00Z')",
    );
    let inbox = get(&server, "/v1/inbox", Some(&writer));
    assert_eq!(inbox.body, cli(&brain, &["inbox", "list"]));
    let ids: Vec<i64> = inbox
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "beta's item is not listed: {}", inbox.text);
    let accepted = send(
        &server,
        "POST",
        &format!("/v1/inbox/{}/accept", ids[0]),
        Some(&writer),
        "",
    );
    assert_eq!(accepted.body["status"], "added", "{}", accepted.text);
    let kept = accepted.body["id"].as_i64().unwrap();
    assert_eq!(
        cli(&brain, &["show", &kept.to_string()])["body"],
        "We fire the kiln on Fridays only."
    );
    let again = send(
        &server,
        "POST",
        &format!("/v1/inbox/{}/accept", ids[0]),
        Some(&writer),
        "",
    );
    assert_problem(&again, 400);
    let dismissed = send(
        &server,
        "POST",
        &format!("/v1/inbox/{}/dismiss", ids[1]),
        Some(&writer),
        "",
    );
    assert_eq!(
        dismissed.body["resolution"], "dismissed",
        "{}",
        dismissed.text
    );
    let beta_item: i64 = brain
        .sql("SELECT id FROM inbox WHERE project = 'beta'")
        .parse()
        .unwrap();
    for action in ["accept", "dismiss"] {
        assert_problem(
            &send(
                &server,
                "POST",
                &format!("/v1/inbox/{beta_item}/{action}"),
                Some(&writer),
                "",
            ),
            404,
        );
    }
    assert_eq!(
        brain.sql("SELECT count(*) FROM inbox WHERE project = 'beta' AND resolved_at IS NULL"),
        "1"
    );

    // the log: what this project did, as the CLI lists it, the token's name as the actor
    let log = get(&server, "/v1/log?limit=100", Some(&writer));
    assert_eq!(log.body, cli(&brain, &["log", "--limit", "100"]));
    let ops: Vec<&str> = log
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    for op in ["task_add", "task_done", "measure", "aware", "unaware"] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
}

#[test]
fn items_of_another_project_answer_404_and_are_left_alone() {
    let brain = Brain::new();
    let alpha = token(
        &brain,
        &["--name", "a", "--project", "alpha", "--role", "write"],
    );
    let beta = token(
        &brain,
        &["--name", "b", "--project", "beta", "--role", "admin"],
    );
    let server = Server::start(&brain, &[], &[]);
    let task = send(
        &server,
        "POST",
        "/v1/tasks",
        Some(&alpha),
        r#"{"title": "alpha's own task"}"#,
    );
    let task = task.body["id"].as_i64().unwrap();
    let aware = send(
        &server,
        "POST",
        "/v1/awareness",
        Some(&alpha),
        r#"{"text": "alpha is deploying"}"#,
    );
    let item = aware.body["item"]["id"].as_i64().unwrap();
    let record = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&alpha),
        r#"{"type": "fact", "body": "alpha's kiln reaches cone 10"}"#,
    );
    let record = record.body["id"].as_i64().unwrap();

    assert_problem(
        &send(
            &server,
            "POST",
            &format!("/v1/tasks/{task}/done"),
            Some(&beta),
            "",
        ),
        404,
    );
    let not_dropped = answer(
        agent()
            .delete(format!("{}/v1/awareness/{item}", server.url))
            .header("Authorization", format!("Bearer {beta}"))
            .call(),
    );
    assert_eq!(not_dropped.body, json!({"id": item, "dropped": false}));
    assert_problem(
        &send(
            &server,
            "POST",
            &format!("/v1/records/{record}/supersede"),
            Some(&beta),
            r#"{"body": "beta says cone 6"}"#,
        ),
        404,
    );
    assert_problem(
        &get(&server, &format!("/v1/records/{record}/decay"), Some(&beta)),
        404,
    );
    // nothing of alpha's changed
    assert_eq!(cli(&brain, &["task", "list"])[0]["status"], "open");
    assert_eq!(
        cli(&brain, &["awareness", "list"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        cli(&brain, &["show", &record.to_string()])["status"],
        "active"
    );
    // and alpha's own calls work
    let superseded = send(
        &server,
        "POST",
        &format!("/v1/records/{record}/supersede"),
        Some(&alpha),
        r#"{"body": "alpha's kiln reaches cone 11 since the new elements"}"#,
    );
    assert_eq!(superseded.status, 200, "{}", superseded.text);
    let new = superseded.body["id"].as_i64().unwrap();
    let old = cli(&brain, &["show", &record.to_string()]);
    assert_eq!(old["status"], "superseded");
    assert_eq!(old["superseded_by"], new);
    let explained = get(&server, &format!("/v1/records/{new}/decay"), Some(&alpha));
    assert_eq!(
        explained.body,
        cli(&brain, &["decay", "--explain", &new.to_string()])
    );
}

#[test]
fn the_graph_endpoints_relate_walk_and_unrelate_as_the_cli_does() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(&brain, &[], &[]);
    for name in ["checkout", "payments"] {
        let added = send(
            &server,
            "POST",
            "/v1/graph/entities",
            Some(&writer),
            &format!(r#"{{"name": "{name}", "type": "service"}}"#),
        );
        assert_eq!(added.body["status"], "added", "{}", added.text);
    }
    let related = send(
        &server,
        "POST",
        "/v1/graph/relate",
        Some(&writer),
        r#"{"src": "checkout", "relation": "requires", "dst": "payments", "from": "2026-01-01"}"#,
    );
    assert_eq!(related.status, 200, "{}", related.text);
    assert_eq!(related.body["status"], "asserted");
    let unknown = send(
        &server,
        "POST",
        "/v1/graph/relate",
        Some(&writer),
        r#"{"src": "checkout", "relation": "loves", "dst": "payments"}"#,
    );
    assert_problem(&unknown, 409);

    // (a fixed `as_of`: the answers carry it, and "now" moves between two calls)
    let blast = get(
        &server,
        "/v1/graph/neighbors?node=payments&direction=in&as_of=2026-03-01",
        Some(&writer),
    );
    assert_eq!(blast.status, 200, "{}", blast.text);
    assert_eq!(blast.body["neighbors"][0]["node"]["name"], "checkout");
    assert_eq!(
        blast.body,
        cli(
            &brain,
            &[
                "neighbors",
                "payments",
                "--direction",
                "in",
                "--as-of",
                "2026-03-01"
            ]
        )
    );
    let sideways = get(
        &server,
        "/v1/graph/neighbors?node=payments&direction=sideways",
        Some(&writer),
    );
    assert_problem(&sideways, 400);
    assert_eq!(sideways.body["field"], "direction");
    assert_eq!(
        get(
            &server,
            "/v1/graph/edges?node=checkout&history=true&as_of=2026-03-01",
            Some(&writer)
        )
        .body,
        cli(
            &brain,
            &["edges", "checkout", "--history", "--as-of", "2026-03-01"]
        )
    );
    assert_eq!(
        get(&server, "/v1/graph/entities", Some(&writer)).body,
        cli(&brain, &["entities"])
    );
    assert_eq!(
        get(&server, "/v1/graph/clusters?min_size=2", Some(&writer)).body,
        cli(&brain, &["clusters", "--min-size", "2"])
    );
    let ended = send(
        &server,
        "POST",
        "/v1/graph/unrelate",
        Some(&writer),
        r#"{"src": "checkout", "relation": "requires", "dst": "payments", "at": "2026-06-01"}"#,
    );
    assert_eq!(ended.body["status"], "invalidated", "{}", ended.text);
    // the graph as of a date before the end still has the edge; today it does not
    let then = get(&server, "/v1/graph?as_of=2026-03-01", Some(&writer));
    assert_eq!(then.body["edges"], 1, "{}", then.text);
    assert_eq!(then.body, cli(&brain, &["graph", "--as-of", "2026-03-01"]));
    assert_eq!(get(&server, "/v1/graph", Some(&writer)).body["edges"], 0);
    assert_problem(&get(&server, "/v1/graph/edges", Some(&writer)), 400);
}

#[test]
fn decay_and_dreams_need_a_token_for_every_project_and_answer_the_cli_json() {
    let brain = Brain::new();
    let project = token(
        &brain,
        &["--name", "p", "--project", "alpha", "--role", "admin"],
    );
    let admin = token(&brain, &["--name", "root", "--all", "--role", "admin"]);
    let reader = token(&brain, &["--name", "r", "--all", "--role", "read"]);
    for n in 0..3 {
        cli(
            &brain,
            &[
                "remember",
                "--type",
                "note",
                "--body",
                &format!("the studio kiln needs new elements before the spring firing, note {n}"),
                "--allow-duplicate",
            ],
        );
    }
    let server = Server::start(&brain, &[], &[]);
    let as_admin = |method: &str, path: &str, body: &str, token: &str| {
        let url = format!("{}{path}", server.url);
        let agent = agent();
        let request = match method {
            "GET" => {
                return answer(
                    agent
                        .get(url)
                        .header("Authorization", format!("Bearer {token}"))
                        .header("Cairn-Project", "alpha")
                        .call(),
                );
            }
            _ => agent.post(url),
        };
        answer(
            request
                .header("Authorization", format!("Bearer {token}"))
                .header("Cairn-Project", "alpha")
                .header("Content-Type", "application/json")
                .send(body),
        )
    };
    for path in ["/v1/decay", "/v1/dream"] {
        assert_problem(&get(&server, path, Some(&project)), 403);
    }
    assert_problem(
        &send(&server, "POST", "/v1/dream", Some(&project), "{}"),
        403,
    );
    assert_problem(&as_admin("POST", "/v1/decay", "", &reader), 403);

    let plan = as_admin("GET", "/v1/decay", "", &admin);
    assert_eq!(plan.status, 200, "{}", plan.text);
    assert_eq!(plan.body["dry_run"], true);
    assert_eq!(plan.body, cli(&brain, &["decay", "--dry-run"]));
    let applied = as_admin("POST", "/v1/decay", "", &admin);
    assert_eq!(applied.body["dry_run"], false, "{}", applied.text);

    let dreamed = as_admin("POST", "/v1/dream", r#"{"no_llm": true}"#, &admin);
    assert_eq!(dreamed.status, 200, "{}", dreamed.text);
    let id = dreamed.body["dream"]["id"].as_str().unwrap().to_string();
    let listed = as_admin("GET", "/v1/dream", "", &admin);
    assert_eq!(listed.body, cli(&brain, &["dream", "list"]));
    let shown = as_admin("GET", &format!("/v1/dream/{id}"), "", &admin);
    assert_eq!(shown.body, cli(&brain, &["dream", "show", &id]));
    assert_problem(&as_admin("GET", "/v1/dream/nosuchdream", "", &admin), 404);
    let rejected = as_admin("POST", &format!("/v1/dream/{id}/reject"), "", &admin);
    assert_eq!(
        rejected.body,
        json!({"status": "rejected", "id": id}),
        "{}",
        rejected.text
    );
    // a decided set is refused, as the CLI refuses it (exit 3)
    let late = as_admin("POST", &format!("/v1/dream/{id}/accept"), "{}", &admin);
    assert_problem(&late, 409);
    let bad_kind = as_admin(
        "POST",
        &format!("/v1/dream/{id}/accept"),
        r#"{"only": "merge"}"#,
        &admin,
    );
    assert_problem(&bad_kind, 400);
    assert_eq!(bad_kind.body["field"], "only");
}

#[test]
fn openapi_gives_every_json_answer_its_schema() {
    let brain = Brain::new();
    let server = Server::start(&brain, &[], &[]);
    let openapi = get(&server, "/openapi.json", None);
    let paths = openapi.body["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            let content = &operation["responses"]["200"]["content"];
            if let Some(schema) = content.get("application/json").map(|c| &c["schema"]) {
                assert!(
                    schema.as_object().is_some_and(|s| !s.is_empty()),
                    "{method} {path} has no answer schema"
                );
            }
        }
    }
    assert!(operations >= 45, "{operations} operations");
    for (path, method) in [
        ("/v1/tasks", "post"),
        ("/v1/graph/neighbors", "get"),
        ("/v1/dream/{dream}/accept", "post"),
        ("/v1/records/{id}/supersede", "post"),
        ("/v1/identity", "put"),
        ("/v1/awareness/{id}", "delete"),
        ("/v1/records/{id}/decay", "get"),
    ] {
        assert!(
            paths[path].get(method).is_some(),
            "{method} {path} missing from /openapi.json"
        );
    }
    let task =
        &paths["/v1/tasks"]["post"]["responses"]["200"]["content"]["application/json"]["schema"];
    for field in ["id", "title", "status", "due_at"] {
        assert!(
            task["properties"].get(field).is_some(),
            "the task schema lacks {field}: {task}"
        );
    }
    let remember =
        &paths["/v1/remember"]["post"]["responses"]["200"]["content"]["application/json"]["schema"];
    assert!(
        remember["properties"].get("ways_out").is_some(),
        "{remember}"
    );
}

/// Reads from `stream` until the server closes it or answers; `None` when nothing came within
/// `wait` (the client's own generous deadline).
fn read_until_closed(
    stream: &mut std::net::TcpStream,
    wait: std::time::Duration,
) -> Option<String> {
    use std::io::Read;
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Some(String::from_utf8_lossy(&received).into_owned()),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            // a reset is the server closing too
            Err(_) => return Some(String::from_utf8_lossy(&received).into_owned()),
        }
    }
}

#[test]
fn slow_clients_are_cut_off_by_the_header_and_body_timeouts_while_others_are_served() {
    use std::io::Write;
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let server = Server::start(
        &brain,
        &["--header-timeout", "1", "--body-timeout", "1"],
        &[],
    );
    let address = server.url.trim_start_matches("http://").to_string();
    let generous = std::time::Duration::from_secs(60);

    // headers that never finish: the connection is closed, nothing is answered
    let mut headers = std::net::TcpStream::connect(&address).unwrap();
    write!(
        headers,
        "GET /healthz HTTP/1.1\r\nHost: {address}\r\nX-Slow: "
    )
    .unwrap();
    // a body that never finishes: 408, nothing stored
    let mut body = std::net::TcpStream::connect(&address).unwrap();
    write!(
        body,
        "POST /v1/remember HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {writer}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{{\"type\": \"note\", "
    )
    .unwrap();
    // meanwhile another client is served
    assert_eq!(get(&server, "/healthz", None).status, 200);

    let cut = read_until_closed(&mut headers, generous)
        .expect("a client stalling in its headers is disconnected within the deadline");
    assert!(
        !cut.contains("200 OK"),
        "a request with unfinished headers was answered: {cut}"
    );
    let timed_out = read_until_closed(&mut body, generous)
        .expect("a client stalling in its body is answered within the deadline");
    assert!(timed_out.starts_with("HTTP/1.1 408"), "{timed_out}");
    assert!(
        timed_out.contains("did not arrive within 1 s"),
        "{timed_out}"
    );
    assert_eq!(cli(&brain, &["list"]), json!([]));
    assert_eq!(get(&server, "/healthz", None).status, 200);
}

#[test]
fn a_thousand_idle_connections_are_held_while_requests_still_answer() {
    const IDLE: usize = 1000;
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    // The server gets an open-file limit with room for the idle connections (a shell raises
    // it, within the hard limit, and execs the server); idle connections stay open for the
    // header timeout, long enough for the whole test.
    let mut shell = Command::new("sh");
    shell.args([
        "-c",
        "ulimit -n 4096 2>/dev/null || ulimit -n \"$(ulimit -Hn)\"; exec \"$0\" \"$@\"",
    ]);
    shell.arg(assert_cmd::cargo::cargo_bin("cairn"));
    let server = Server::spawn(&brain, shell, &["--header-timeout", "120"], &[]);
    let address = server.url.trim_start_matches("http://").to_string();
    let (host, port) = address.rsplit_once(':').unwrap();
    // A real client process holds the idle connections (raising its own limit the same way),
    // says when all are connected, sends one request on the last of them, and keeps them
    // open until its stdin closes.
    let holder = r#"
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = [socket.create_connection((host, port), timeout=60) for _ in range(n)]
print("held", len(held), flush=True)
sys.stdin.readline()
last = held[-1]
last.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
answer = b""
while True:
    chunk = last.recv(4096)
    if not chunk:
        break
    answer += chunk
print(answer.split(b"\r\n")[0].decode(), flush=True)
sys.stdin.readline()
"#;
    let mut client = Command::new("python3")
        .args(["-c", holder, host, port, &IDLE.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let first = lines.next().map(Result::unwrap).unwrap_or_default();
    assert_eq!(
        first,
        format!("held {IDLE}"),
        "the client could not hold its connections: {}",
        {
            let _ = client.kill();
            let output = client.wait_with_output().unwrap();
            String::from_utf8_lossy(&output.stderr).into_owned()
        }
    );
    // with all of them open, requests on new connections are answered
    for n in 0..20 {
        let stored = send(
            &server,
            "POST",
            "/v1/remember",
            Some(&writer),
            &format!(
                r#"{{"type": "note", "body": "written beside a thousand idle sockets, {n}"}}"#
            ),
        );
        assert_eq!(stored.status, 200, "{}", stored.text);
    }
    let recalled = send(
        &server,
        "POST",
        "/v1/recall",
        Some(&writer),
        r#"{"query": "idle sockets", "limit": 50}"#,
    );
    assert_eq!(recalled.body["results"].as_array().unwrap().len(), 20);
    // and every idle one was accepted and held: the last one is answered too
    let mut stdin = client.stdin.take().unwrap();
    {
        use std::io::Write;
        writeln!(stdin).unwrap();
    }
    let status_line = lines.next().map(Result::unwrap).unwrap_or_default();
    assert_eq!(status_line, "HTTP/1.1 200 OK");
    drop(stdin);
    assert!(client.wait().unwrap().success());
    assert_eq!(get(&server, "/healthz", None).status, 200);
    assert!(
        !server.log().contains("was not accepted"),
        "{}",
        server.log()
    );
}

/// A CA and a certificate for 127.0.0.1 it signed, written as PEM files in `dir`: (CA PEM,
/// certificate file, key file).
fn test_certificate(dir: &std::path::Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "cairn serve test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let cert_file = dir.join("server.pem");
    let key_file = dir.join("server.key");
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (ca_cert.pem(), cert_file, key_file)
}

fn tls_agent(ca_pem: &str) -> ureq::Agent {
    use ureq::tls::{PemItem, RootCerts, TlsConfig, parse_pem};
    let roots: Vec<_> = parse_pem(ca_pem.as_bytes())
        .filter_map(|item| match item.unwrap() {
            PemItem::Certificate(certificate) => Some(certificate),
            _ => None,
        })
        .collect();
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .build();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(tls)
        .build()
        .into()
}

#[test]
fn direct_tls_serves_https_to_a_real_tls_client_and_bad_files_stop_the_start() {
    let brain = Brain::new();
    let writer = token(
        &brain,
        &["--name", "w", "--project", "alpha", "--role", "write"],
    );
    let (ca_pem, cert, key) = test_certificate(brain.dir.path());
    let cert_arg = cert.display().to_string();
    let key_arg = key.display().to_string();
    let server = Server::start(
        &brain,
        &["--tls-cert", &cert_arg, "--tls-key", &key_arg],
        &[],
    );
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let client = tls_agent(&ca_pem);
    let stored = answer(
        client
            .post(format!("{}/v1/remember", server.url))
            .header("Authorization", format!("Bearer {writer}"))
            .header("Content-Type", "application/json")
            .send(r#"{"type": "fact", "body": "the studio serves its memory over TLS"}"#),
    );
    assert_eq!(stored.status, 200, "{}", stored.text);
    let recalled = answer(
        client
            .post(format!("{}/v1/recall", server.url))
            .header("Authorization", format!("Bearer {writer}"))
            .send(r#"{"query": "memory over TLS"}"#),
    );
    assert_eq!(recalled.body["results"][0]["id"], stored.body["id"]);
    // plain HTTP on the TLS port is not answered as HTTP
    let plain = agent()
        .get(server.url.replacen("https://", "http://", 1) + "/healthz")
        .call();
    assert!(
        plain.is_err() || plain.unwrap().status() != 200,
        "plain HTTP was served on the TLS port"
    );
    // a client that does not trust the certificate is refused by its own TLS check
    assert!(
        agent()
            .get(format!("{}/healthz", server.url))
            .call()
            .is_err()
    );
    drop(server);

    let garbage = brain.dir.path().join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").unwrap();
    let garbage_arg = garbage.display().to_string();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let other_key_file = brain.dir.path().join("other.key");
    std::fs::write(&other_key_file, other_key.serialize_pem()).unwrap();
    let other_key_arg = other_key_file.display().to_string();
    let missing = brain.dir.path().join("missing.pem").display().to_string();
    for (args, says) in [
        (
            vec![
                "--tls-cert",
                missing.as_str(),
                "--tls-key",
                key_arg.as_str(),
            ],
            "cannot read the certificate",
        ),
        (
            vec![
                "--tls-cert",
                garbage_arg.as_str(),
                "--tls-key",
                key_arg.as_str(),
            ],
            "holds no certificate",
        ),
        (
            vec![
                "--tls-cert",
                cert_arg.as_str(),
                "--tls-key",
                garbage_arg.as_str(),
            ],
            "is not a PEM private key",
        ),
        (
            vec![
                "--tls-cert",
                cert_arg.as_str(),
                "--tls-key",
                other_key_arg.as_str(),
            ],
            "does not fit the certificate",
        ),
    ] {
        let output = brain
            .cmd()
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stderr.contains("nothing was started"), "{stderr}");
    }
}

#[test]
fn schemathesis_finds_no_server_error_anywhere_in_the_api() {
    let st = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-test/bin/st");
    assert!(
        st.exists(),
        "schemathesis is missing: run `bash scripts/setup.sh` (it installs it into .venv-test/)"
    );
    let brain = Brain::new();
    let admin = token(&brain, &["--name", "fuzz", "--all", "--role", "admin"]);
    cli(
        &brain,
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "the kiln vent opens before cone 6",
        ],
    );
    let server = Server::start(&brain, &[], &[]);
    let output = Command::new(&st)
        .arg("run")
        .arg(format!("{}/openapi.json", server.url))
        .args(["--checks", "not_a_server_error"])
        .args(["--max-examples", "4", "--seed", "7", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--generation-database", "none", "--no-color"])
        .args(["--request-timeout", "30", "--suppress-health-check", "all"])
        .args(["-H", &format!("Authorization: Bearer {admin}")])
        .args(["-H", "Cairn-Project: alpha"])
        .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
        .env(
            "PYTHONPATH",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        )
        .current_dir(brain.dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// The server keeps the full-text index in memory (issue 14): what another process (the CLI)
/// writes, changes and deletes while it runs is what its next recall finds, exactly as the
/// CLI's own recall (FTS5) finds it.
#[test]
fn recall_follows_what_the_cli_writes_while_the_server_holds_its_index() {
    let brain = Brain::new();
    let reader = token(
        &brain,
        &["--name", "reader", "--project", "alpha", "--role", "read"],
    );
    for i in 0..30 {
        cli(
            &brain,
            &[
                "remember",
                "--type",
                "fact",
                "--body",
                &format!("glaze batch {i} fired in the kiln"),
            ],
        );
    }
    let server = Server::start(&brain, &[], &[]);
    let recall = |query: &str| -> Vec<i64> {
        let body = json!({"query": query, "mode": "lexical", "limit": 50}).to_string();
        let answer = send(&server, "POST", "/v1/recall", Some(&reader), &body);
        assert_eq!(answer.status, 200, "{}", answer.text);
        let mut ids: Vec<i64> = answer.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    let cli_recall = |query: &str| -> Vec<i64> {
        let answer = cli(&brain, &["recall", query, "--no-touch", "--limit", "50"]);
        let mut ids: Vec<i64> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(recall("kiln").len(), 30);
    assert!(recall("zephyrine").is_empty());
    let added = cli(
        &brain,
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "Zephyrine glass cracks when the kiln cools fast",
        ],
    );
    let id = added["id"].as_i64().unwrap();
    assert_eq!(recall("zephyrine"), vec![id]);
    assert_eq!(recall("kiln").len(), 31);
    assert_eq!(recall("kiln"), cli_recall("kiln"));
    // Changed by the CLI: the old words no longer find it, the new ones do.
    cli(
        &brain,
        &[
            "update",
            &id.to_string(),
            "--body",
            "Obsidian shards need a slow anneal",
        ],
    );
    assert!(recall("zephyrine").is_empty());
    assert_eq!(recall("obsidian anneal"), vec![id]);
    assert_eq!(recall("kiln"), cli_recall("kiln"));
    // Forgotten for good (a hard delete takes it out of the full-text index).
    cli(&brain, &["forget", &id.to_string(), "--hard"]);
    assert!(recall("obsidian").is_empty());
    assert_eq!(recall("kiln"), cli_recall("kiln"));
}

/// `method path` with `token` in project `alpha` (a token for every project names it), and a
/// JSON body unless it is empty.
fn in_alpha(server: &Server, method: &str, path: &str, token: &str, body: &str) -> Answer {
    let url = format!("{}{path}", server.url);
    let agent = agent();
    let auth = format!("Bearer {token}");
    match method {
        "GET" => answer(
            agent
                .get(url)
                .header("Authorization", auth)
                .header("Cairn-Project", "alpha")
                .call(),
        ),
        "DELETE" => answer(
            agent
                .delete(url)
                .header("Authorization", auth)
                .header("Cairn-Project", "alpha")
                .call(),
        ),
        "POST" => answer(
            agent
                .post(url)
                .header("Authorization", auth)
                .header("Cairn-Project", "alpha")
                .header("Content-Type", "application/json")
                .send(body),
        ),
        other => panic!("{other}"),
    }
}

#[test]
fn tokens_are_an_admins_for_every_project_shown_once_and_revoked_at_once() {
    let brain = Brain::new();
    let project_admin = token(
        &brain,
        &["--name", "p", "--project", "alpha", "--role", "admin"],
    );
    let writer = token(&brain, &["--name", "w", "--all", "--role", "write"]);
    let admin = token(&brain, &["--name", "root", "--all", "--role", "admin"]);
    let server = Server::start(&brain, &[], &[]);
    // A project's admin could make a token for every project: refused, as is a writer.
    for refused in [&project_admin, &writer] {
        assert_problem(&in_alpha(&server, "GET", "/v1/tokens", refused, ""), 403);
        let made = in_alpha(
            &server,
            "POST",
            "/v1/tokens",
            refused,
            r#"{"name": "x", "all": true, "role": "admin"}"#,
        );
        assert_problem(&made, 403);
        assert_problem(
            &in_alpha(&server, "DELETE", "/v1/tokens/w", refused, ""),
            403,
        );
    }
    // Bad bodies: 400 naming the field, and no token made.
    for (body, field) in [
        (r#"{"name": "x", "all": true, "role": "boss"}"#, "role"),
        (r#"{"name": "x", "role": "read"}"#, "project"),
        (
            r#"{"name": "x", "project": "alpha", "all": true, "role": "read"}"#,
            "project",
        ),
        (r#"{"name": 7, "all": true, "role": "read"}"#, "name"),
    ] {
        let refused = in_alpha(&server, "POST", "/v1/tokens", &admin, body);
        assert_problem(&refused, 400);
        assert_eq!(refused.body["field"], field, "{body}: {}", refused.text);
    }
    let no_role = in_alpha(
        &server,
        "POST",
        "/v1/tokens",
        &admin,
        r#"{"name": "x", "all": true}"#,
    );
    assert_problem(&no_role, 400);
    assert!(no_role.text.contains("`role`"), "{}", no_role.text);
    assert_problem(
        &in_alpha(&server, "POST", "/v1/tokens", &admin, "{not json"),
        400,
    );

    let listed = in_alpha(&server, "GET", "/v1/tokens", &admin, "");
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body, cli(&brain, &["token", "list"]));
    assert_eq!(listed.body.as_array().unwrap().len(), 3);

    let made = in_alpha(
        &server,
        "POST",
        "/v1/tokens",
        &admin,
        r#"{"name": "bot", "project": "alpha", "role": "read", "expires": "30d"}"#,
    );
    assert_eq!(made.status, 200, "{}", made.text);
    let secret = made.body["token"].as_str().unwrap().to_string();
    assert!(
        secret.starts_with("cairn_") && secret.len() == 70,
        "{}",
        made.text
    );
    assert_eq!(made.body["role"], "read");
    assert_eq!(made.body["project"], "alpha");
    assert_eq!(made.body["state"], "active");
    assert_eq!(get(&server, "/v1/records", Some(&secret)).status, 200);
    // Never shown again: not in the list, not in the CLI's list, not in the log.
    let listed = in_alpha(&server, "GET", "/v1/tokens", &admin, "");
    assert!(listed.text.contains("\"bot\""), "{}", listed.text);
    assert!(!listed.text.contains(&secret));
    assert!(!server.log().contains(&secret));

    let revoked = in_alpha(&server, "DELETE", "/v1/tokens/bot", &admin, "");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    assert_eq!(revoked.body["status"], "revoked");
    assert_eq!(revoked.body["token"]["state"], "revoked");
    // At once: the very next request with it.
    assert_problem(&get(&server, "/v1/records", Some(&secret)), 401);
    assert_problem(
        &in_alpha(&server, "DELETE", "/v1/tokens/no-such-token", &admin, ""),
        400,
    );
}

#[test]
fn settings_and_the_model_status_are_read_with_a_token_for_every_project() {
    let brain = Brain::new();
    cli(&brain, &["config", "set", "capture.extract", "auto"]);
    let project = token(
        &brain,
        &["--name", "p", "--project", "alpha", "--role", "admin"],
    );
    let reader = token(&brain, &["--name", "r", "--all", "--role", "read"]);
    let server = Server::start(&brain, &[], &[]);
    for path in ["/v1/config", "/v1/config/capture.extract", "/v1/semantic"] {
        assert_problem(&get(&server, path, Some(&project)), 403);
        assert_problem(&get(&server, path, None), 401);
    }
    let listed = in_alpha(&server, "GET", "/v1/config", &reader, "");
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body, cli(&brain, &["config", "list"]));
    let one = in_alpha(&server, "GET", "/v1/config/capture.extract", &reader, "");
    assert_eq!(one.body, cli(&brain, &["config", "get", "capture.extract"]));
    assert_eq!(one.body["value"], "auto");
    assert_eq!(one.body["from"], "brain");
    let unknown = in_alpha(&server, "GET", "/v1/config/no.such.key", &reader, "");
    assert_problem(&unknown, 400);
    assert!(unknown.text.contains("unknown setting"), "{}", unknown.text);
    // Settings are not changed over HTTP.
    let set = in_alpha(&server, "POST", "/v1/config/llm.command", &reader, "{}");
    assert_eq!(set.status, 405, "{}", set.text);

    // The server was started with CAIRN_EMBEDDER=none: it says so, and why recall is lexical.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        let status = in_alpha(&server, "GET", "/v1/semantic", &reader, "");
        assert_eq!(status.status, 200, "{}", status.text);
        let loading = status.body["semantic"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("still loading"));
        if !loading || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.body["provider"], "none", "{}", status.text);
    assert_eq!(status.body["ok"], false);
    assert!(
        status.body["semantic"]["problem"]
            .as_str()
            .unwrap()
            .contains("no embedder is configured"),
        "{}",
        status.text
    );
    assert_eq!(status.body["semantic"]["counts"]["records"], 0);
}

/// Two turns of a Gemini session through the hooks endpoint: an error, then its fix (the
/// extraction's rules make a gotcha of them).
fn error_and_fix(server: &Server, token: &str, session: &str) {
    // Each session's own host: the same turns twice would be captured once.
    for (prompt, response) in [
        (
            format!("the deploy failed with error E1234 on the {session} host"),
            "Looking at the deploy logs.".to_string(),
        ),
        (
            "any luck with it".to_string(),
            format!("Fixed: the {session} host was missing DEPLOY_KEY, exported it in deploy.sh."),
        ),
    ] {
        let body = json!({"session": session, "prompt": prompt, "response": response});
        let turn = send(
            server,
            "POST",
            "/v1/hooks/turn",
            Some(token),
            &body.to_string(),
        );
        assert_eq!(turn.status, 200, "{}", turn.text);
    }
}

#[test]
fn maintenance_and_extraction_run_on_the_server_and_a_session_end_starts_it_unwaited() {
    let brain = Brain::new();
    let hook = token(
        &brain,
        &["--name", "hook", "--project", "alpha", "--role", "write"],
    );
    let reader = token(&brain, &["--name", "r", "--all", "--role", "read"]);
    let admin = token(&brain, &["--name", "root", "--all", "--role", "write"]);
    let server = Server::start(&brain, &[], &[]);
    // The whole brain's work: a project's token and a read token are refused.
    for path in ["/v1/maintain", "/v1/extract"] {
        assert_problem(&send(&server, "POST", path, Some(&hook), "{}"), 403);
        assert_problem(&in_alpha(&server, "POST", path, &reader, "{}"), 403);
        for (body, field) in [
            (r#"{"session": 5}"#, "session"),
            (r#"{"session": " "}"#, "session"),
        ] {
            let refused = in_alpha(&server, "POST", path, &admin, body);
            assert_problem(&refused, 400);
            assert_eq!(refused.body["field"], field, "{body}: {}", refused.text);
        }
        assert_problem(&in_alpha(&server, "POST", path, &admin, "[1]"), 400);
    }
    let bad_flag = in_alpha(
        &server,
        "POST",
        "/v1/extract",
        &admin,
        r#"{"no_llm": "yes"}"#,
    );
    assert_problem(&bad_flag, 400);
    assert_eq!(bad_flag.body["field"], "no_llm", "{}", bad_flag.text);
    assert_problem(&get(&server, "/v1/maintain", Some(&hook)), 403);

    error_and_fix(&server, &hook, "gem-1");
    let extracted = in_alpha(
        &server,
        "POST",
        "/v1/extract",
        &admin,
        r#"{"session": "gem-1", "no_llm": true}"#,
    );
    assert_eq!(extracted.status, 200, "{}", extracted.text);
    assert_eq!(
        extracted.body["method"], "deterministic",
        "{}",
        extracted.text
    );
    assert_eq!(extracted.body["inbox"], 1, "{}", extracted.text);
    let again = in_alpha(
        &server,
        "POST",
        "/v1/extract",
        &admin,
        r#"{"no_llm": true}"#,
    );
    assert_eq!(again.body["turns"], 0, "{}", again.text);

    let status = in_alpha(&server, "GET", "/v1/maintain", &reader, "");
    assert_eq!(status.status, 200, "{}", status.text);
    let steps: Vec<&str> = status.body["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["extract", "embed", "decay", "dream"]);
    assert!(status.body["steps"][3]["last"].is_null(), "{}", status.text);

    // A session's end, with a project's write token as a hook has: noted, and the maintenance
    // it makes due started on the server — the answer does not wait for it.
    error_and_fix(&server, &hook, "gem-2");
    let ended = send(
        &server,
        "POST",
        "/v1/hooks/session-end",
        Some(&hook),
        r#"{"session": "gem-2", "reason": "exit"}"#,
    );
    assert_eq!(ended.status, 200, "{}", ended.text);
    assert_eq!(ended.body["maintenance"], "started", "{}", ended.text);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let ran = loop {
        let status = in_alpha(&server, "GET", "/v1/maintain", &reader, "");
        if !status.body["steps"][3]["last"].is_null() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the maintenance did not run within 60 s: {}\n{}",
            status.text,
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let extract = &ran.body["steps"][0]["last"];
    assert_eq!(extract["outcome"], "ok", "{}", ran.text);
    assert!(
        extract["summary"]
            .as_str()
            .unwrap()
            .starts_with("2 turns of 1 sessions"),
        "{}",
        ran.text
    );
    assert_eq!(
        ran.body["steps"][3]["last"]["outcome"], "ok",
        "{}",
        ran.text
    );
    assert_eq!(
        ran.body["steps"][1]["due"], "always: the server's background indexer",
        "{}",
        ran.text
    );
    // Nothing is due any more: the next end starts nothing.
    let ended = send(
        &server,
        "POST",
        "/v1/hooks/session-end",
        Some(&hook),
        r#"{"session": "gem-2"}"#,
    );
    assert_eq!(ended.body["maintenance"], "not_due", "{}", ended.text);
    // A run asked for waits and reports its steps, as `cairn maintain --json` does.
    let report = in_alpha(&server, "POST", "/v1/maintain", &admin, "{}");
    assert_eq!(report.status, 200, "{}", report.text);
    assert_eq!(report.body["busy"], false, "{}", report.text);
    assert_eq!(
        report.body["steps"][1]["skipped"],
        "left to the server's background indexer (it embeds records waiting for a vector as they come)",
        "{}",
        report.text
    );
}

#[test]
fn a_session_end_answers_while_its_maintenance_waits_for_the_llm_and_other_calls_go_on() {
    let brain = Brain::new();
    // The brain's LLM: waits until the test opens the gate (at most 60 s), then finds nothing.
    let gate = brain.dir.path().join("gate");
    let llm = brain.dir.path().join("slow-llm.sh");
    std::fs::write(
        &llm,
        format!(
            "#!/bin/sh\ncat > /dev/null\nn=0\nwhile [ ! -f '{}' ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\necho '{{\"facts\": []}}'\n",
            gate.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&llm, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    cli(
        &brain,
        &["config", "set", "llm.command", &llm.display().to_string()],
    );
    cli(&brain, &["config", "set", "maintenance.dream_every", "off"]);
    let hook = token(
        &brain,
        &["--name", "hook", "--project", "alpha", "--role", "write"],
    );
    let reader = token(&brain, &["--name", "r", "--all", "--role", "read"]);
    let server = Server::start(&brain, &[], &[]);
    error_and_fix(&server, &hook, "slow-1");
    let ended = send(
        &server,
        "POST",
        "/v1/hooks/session-end",
        Some(&hook),
        r#"{"session": "slow-1"}"#,
    );
    // Answered with the gate still shut: the hook did not wait for the LLM.
    assert_eq!(ended.status, 200, "{}", ended.text);
    assert_eq!(ended.body["maintenance"], "started", "{}", ended.text);
    assert!(!gate.exists());
    // Meanwhile a write and a read go on (the run holds an engine of its own).
    let stored = send(
        &server,
        "POST",
        "/v1/remember",
        Some(&hook),
        r#"{"type": "note", "body": "the kiln shelf is cracked on its left corner"}"#,
    );
    assert_eq!(stored.status, 200, "{}", stored.text);
    let status = in_alpha(&server, "GET", "/v1/maintain", &reader, "");
    assert!(status.body["steps"][0]["last"].is_null(), "{}", status.text);
    std::fs::write(&gate, "open").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let ran = loop {
        let status = in_alpha(&server, "GET", "/v1/maintain", &reader, "");
        if !status.body["steps"][0]["last"].is_null() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the maintenance did not end within 60 s of the gate: {}\n{}",
            status.text,
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let extract = &ran.body["steps"][0]["last"];
    assert_eq!(extract["outcome"], "ok", "{}", ran.text);
    assert!(
        extract["summary"]
            .as_str()
            .unwrap()
            .contains("(llm, 1 LLM calls)"),
        "{}",
        ran.text
    );
}
