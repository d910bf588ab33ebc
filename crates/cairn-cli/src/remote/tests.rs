//! The client against a real server: cairn-http's `serve` on a thread of this test process,
//! over a real brain file, on a loopback port and on a Unix socket; tokens made by the engine
//! as `cairn token create` makes them. (Each test is its own process under nextest; the server
//! thread ends with it.)

use super::{Client, ClientOptions, RemoteError, Secret, Target};
use cairn_engine::tokens::{NewToken, Role};
use cairn_engine::{Context, Engine, ErrorKind};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

const PROJECT: &str = "remote-test";

/// A text long enough that a one-word change of it is a near duplicate.
const BILLING: &str = "The billing queue retries failed webhook deliveries five times with exponential backoff starting at two seconds and then gives up and writes the event to the dead letter queue for manual replay by the on call engineer";

/// A brain in a temporary directory with one token per role for `PROJECT`.
struct Brain {
    dir: tempfile::TempDir,
    db: PathBuf,
}

impl Brain {
    fn new() -> Brain {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("brain.db");
        Brain { dir, db }
    }

    fn token(&self, name: &str, role: Role) -> Secret {
        let context = Context {
            project: PROJECT.into(),
            cwd: self.dir.path().to_path_buf(),
            actor: "test".into(),
            read_only: false,
            now: None,
        };
        let mut engine = Engine::open(&self.db, context).unwrap();
        let created = engine
            .token_create(&NewToken {
                name: name.into(),
                project: Some(PROJECT.into()),
                role,
                expires: None,
            })
            .unwrap();
        Secret::new(created.token)
    }

    fn revoke(&self, name: &str) {
        let context = Context {
            project: PROJECT.into(),
            cwd: self.dir.path().to_path_buf(),
            actor: "test".into(),
            read_only: false,
            now: None,
        };
        Engine::open(&self.db, context)
            .unwrap()
            .token_revoke(name)
            .unwrap();
    }

    /// `cairn serve` on `listen` (a body limit of `body` bytes); the address it answers on.
    fn serve(&self, listen: cairn_http::Listen, body: usize) -> String {
        let service =
            cairn_service::Service::new(cairn_service::ServiceOptions::new(self.db.clone()));
        let options = cairn_http::ServeOptions {
            listen,
            limits: cairn_http::Limits {
                body,
                ..cairn_http::Limits::default()
            },
            grace: Duration::from_secs(1),
            tls: None,
            local: false,
            idle_exit: None,
            watch: None,
        };
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let result = cairn_http::serve(service, options, |address| {
                sender.send(address.to_string()).unwrap();
            });
            if let Err(error) = result {
                panic!("the test server stopped: {error}");
            }
        });
        receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("the test server listens")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("cairn.sock")
    }
}

fn client(address: &str, token: Option<Secret>) -> Client {
    Client::new(Target::parse(address).unwrap(), ClientOptions::new(token)).unwrap()
}

/// remember → recall → show → update → forget → restore through one client, each answer the
/// JSON shape of `--json`.
fn story(client: &Client) {
    let added = client
        .post(
            "/v1/remember",
            &json!({"type": "decision", "title": "Queue", "body": BILLING}),
        )
        .unwrap();
    assert_eq!(added["status"], "added", "{added}");
    let id = added["id"].as_i64().unwrap();

    let recalled = client
        .post(
            "/v1/recall",
            &json!({"query": "billing webhook deliveries"}),
        )
        .unwrap();
    assert_eq!(recalled["results"][0]["id"], id, "{recalled}");

    let shown = client.get(&format!("/v1/records/{id}")).unwrap();
    assert_eq!(shown["title"], "Queue", "{shown}");
    assert_eq!(shown["project"], PROJECT, "{shown}");

    let updated = client
        .patch(&format!("/v1/records/{id}"), &json!({"importance": 5}))
        .unwrap();
    assert_eq!(updated["record"]["importance"], 5, "{updated}");

    let forgotten = client.delete(&format!("/v1/records/{id}")).unwrap();
    assert_eq!(forgotten, json!({"status": "archived", "id": id}));
    let restored = client
        .post_empty(&format!("/v1/records/{id}/restore"))
        .unwrap();
    assert_eq!(restored["status"], "restored", "{restored}");

    // The same near-duplicate refused: the problem's kind is refused, exit 3, and its
    // members (`existing`, `outcome`) come along.
    let refused = client
        .post(
            "/v1/remember",
            &json!({"type": "fact", "body": BILLING.replace("on call engineer", "on call engineers")}),
        )
        .unwrap_err();
    assert_eq!(refused.status, Some(409), "{refused:?}");
    assert_eq!(refused.kind, ErrorKind::Refused, "{refused:?}");
    assert_eq!(refused.exit_code(), 3);
    assert_eq!(refused.member("existing"), Some(&json!(id)), "{refused:?}");
    assert_eq!(refused.member("outcome").unwrap()["status"], "refused");

    let missing = client.get("/v1/records/999999").unwrap_err();
    assert_eq!(
        (missing.status, missing.kind, missing.exit_code()),
        (Some(404), ErrorKind::NotFound, 1)
    );
    assert_eq!(missing.detail, "no record #999999 in this brain");
}

#[test]
fn a_story_over_loopback_http() {
    let brain = Brain::new();
    let token = brain.token("laptop", Role::Write);
    let address = brain.serve(
        cairn_http::Listen::Tcp("127.0.0.1:0".parse().unwrap()),
        1 << 20,
    );
    assert!(address.starts_with("http://127.0.0.1:"), "{address}");
    let client = client(&address, Some(token));
    story(&client);
    // The connection is kept between calls: many calls over one client stay cheap.
    for _ in 0..20 {
        assert_eq!(
            client.get("/v1/records").unwrap().as_array().unwrap().len(),
            1
        );
    }
}

#[test]
fn a_story_over_a_unix_socket() {
    let brain = Brain::new();
    let token = brain.token("daemon-user", Role::Write);
    let address = brain.serve(cairn_http::Listen::Unix(brain.socket()), 1 << 20);
    assert_eq!(address, format!("unix:{}", brain.socket().display()));
    let client = client(&address, Some(token));
    story(&client);
    let refused = client.post_empty("/v1/records/1/restore").unwrap_err();
    assert_eq!(refused.status, Some(400), "{refused:?}");
    let health = client.get("/healthz").unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    // Export streams JSONL over the socket.
    let Err(whole) = client.get_reader("/v1/export") else {
        panic!("a project token exported the whole brain");
    };
    assert_eq!(
        whole.kind,
        ErrorKind::Forbidden,
        "a project token cannot export the brain"
    );
}

#[test]
fn credentials_are_checked_and_never_repeated() {
    let brain = Brain::new();
    let reader = brain.token("reader", Role::Read);
    let writer = brain.token("writer", Role::Write);
    let address = brain.serve(cairn_http::Listen::Unix(brain.socket()), 1 << 20);

    let wrong = client(
        &address,
        Some(Secret::new("cairn_".to_string() + &"0".repeat(64))),
    )
    .get("/v1/records")
    .unwrap_err();
    assert_eq!(
        (wrong.status, wrong.kind),
        (Some(401), ErrorKind::Unauthorized)
    );
    assert!(wrong.detail.contains("CAIRN_TOKEN"), "{}", wrong.detail);
    assert!(!wrong.detail.contains("cairn_000"), "{}", wrong.detail);
    let none = client(&address, None).get("/v1/records").unwrap_err();
    assert_eq!(none.kind, ErrorKind::Unauthorized);
    // Refused before its body is read: the body is never sent (`Expect: 100-continue`), so the
    // answer is the 401, not a connection broken while writing.
    let big = json!({"type": "note", "body": "word ".repeat(100_000)});
    for _ in 0..5 {
        let refused = client(&address, None)
            .post("/v1/remember", &big)
            .unwrap_err();
        assert_eq!(
            (refused.status, refused.kind),
            (Some(401), ErrorKind::Unauthorized),
            "{refused:?}"
        );
    }

    let read_only = client(&address, Some(reader.clone()))
        .post(
            "/v1/remember",
            &json!({"type": "note", "body": "a read token writing"}),
        )
        .unwrap_err();
    assert_eq!(
        (read_only.status, read_only.kind, read_only.exit_code()),
        (Some(403), ErrorKind::Forbidden, 1)
    );
    assert!(
        read_only.detail.contains("write role"),
        "{}",
        read_only.detail
    );
    assert_eq!(
        client(&address, Some(reader)).get("/v1/records").unwrap(),
        json!([])
    );

    let writing = client(&address, Some(writer.clone()));
    writing.get("/v1/records").unwrap();
    brain.revoke("writer");
    let revoked = writing.get("/v1/records").unwrap_err();
    assert_eq!(
        revoked.kind,
        ErrorKind::Unauthorized,
        "a revoked token stops at once"
    );
    assert!(
        !format!("{revoked:?}{writer:?}").contains("cairn_"),
        "no secret in Debug"
    );
}

#[test]
fn an_oversize_body_is_refused_with_the_limit() {
    let brain = Brain::new();
    let token = brain.token("laptop", Role::Write);
    let address = brain.serve(cairn_http::Listen::Unix(brain.socket()), 2048);
    let error = client(&address, Some(token))
        .post(
            "/v1/remember",
            &json!({"type": "note", "body": "x".repeat(10_000)}),
        )
        .unwrap_err();
    assert_eq!(
        (error.status, error.kind),
        (Some(413), ErrorKind::Invalid),
        "{error:?}"
    );
    assert_eq!(error.member("limit"), Some(&json!(2048)));
    assert!(error.detail.contains("2048 bytes"), "{}", error.detail);
}

/// A loopback port nothing listens on: bound, then released.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn assert_unreachable(error: &RemoteError, address: &str) {
    assert_eq!(
        (error.status, error.kind, error.exit_code()),
        (None, ErrorKind::Other, 1)
    );
    assert!(
        error
            .detail
            .starts_with(&format!("cannot reach the cairn server at {address} (")),
        "{}",
        error.detail
    );
    assert!(error.detail.contains("unset CAIRN_URL"), "{}", error.detail);
    assert!(!error.detail.contains("cairn_"), "{}", error.detail);
}

#[test]
fn a_server_that_is_down_is_named_and_the_token_is_not() {
    let token = Secret::new(format!("cairn_{}", "1".repeat(64)));
    let address = closed_port();
    let error = client(&address, Some(token.clone()))
        .get("/v1/records")
        .unwrap_err();
    assert_unreachable(&error, &address);

    let dir = tempfile::tempdir().unwrap();
    let missing = format!("unix:{}", dir.path().join("none.sock").display());
    let error = client(&missing, Some(token.clone()))
        .get("/v1/records")
        .unwrap_err();
    assert_unreachable(&error, &missing);

    // A stale socket file (its server gone): refused like a closed port.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let stale = format!("unix:{}", stale.display());
    let error = client(&stale, Some(token)).get("/v1/records").unwrap_err();
    assert_unreachable(&error, &stale);
}

/// A socket that accepts and never answers: the call ends at its deadline with an error that
/// says the outcome is unknown.
#[test]
fn a_silent_server_ends_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        // Holds the accepted connection open (never answers) until the client gives up.
        let (mut stream, _) = listener.accept().unwrap();
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stream, &mut sink);
    });
    let mut options = ClientOptions::new(None);
    options.deadline = Some(Duration::from_millis(300));
    let address = format!("unix:{}", path.display());
    let client = Client::new(Target::parse(&address).unwrap(), options).unwrap();
    let error = client
        .post("/v1/remember", &json!({"type": "note", "body": "x"}))
        .unwrap_err();
    assert_eq!(
        (error.status, error.kind),
        (None, ErrorKind::Other),
        "{error:?}"
    );
    assert!(
        error
            .detail
            .contains("did not answer in time (deadline 300 ms)")
            && error.detail.contains("may or may not have been applied"),
        "{}",
        error.detail
    );
}

#[test]
fn a_ca_file_that_cannot_be_read_is_said_before_anything_is_sent() {
    let mut options = ClientOptions::new(None);
    options.ca_file = Some(Path::new("/nonexistent/ca.pem").to_path_buf());
    let error =
        Client::new(Target::parse("https://cairn.example.com").unwrap(), options).unwrap_err();
    assert!(
        error.detail.contains("/nonexistent/ca.pem"),
        "{}",
        error.detail
    );
}
