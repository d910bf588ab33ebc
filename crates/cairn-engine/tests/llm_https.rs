//! Regression (issue 13, item 6): `llm.url` over `https://` — the default build had no TLS.
//! A real HTTPS server on 127.0.0.1 answers the chat completions shape; the LLM call gets its
//! reply when the server's CA is trusted and a clear error when it is not.

#[path = "../../cairn-embed/tests/support/https_server.rs"]
mod https_server;

use std::time::Duration;

use cairn_engine::lifecycle::LlmConfig;
use https_server::{CHAT_REPLY, HttpsServer};

fn llm(server: &HttpsServer) -> LlmConfig {
    LlmConfig::Http {
        url: format!("{}/v1", server.url),
        model: "gpt-test".to_string(),
        api_key: Some("sk-test".to_string()),
        timeout: Duration::from_secs(60),
    }
}

#[test]
fn an_https_llm_url_answers_when_its_ca_is_trusted() {
    let server = HttpsServer::start();
    let reply = llm(&server)
        .complete_trusting("Summarize: tea, kettle.", Some(server.ca_file()))
        .expect("the chat call goes over TLS");
    assert_eq!(reply, CHAT_REPLY);
    assert_eq!(server.answered.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn an_untrusted_https_llm_url_is_an_error_that_names_it() {
    let server = HttpsServer::start();
    let error = llm(&server)
        .complete_trusting("Summarize: tea.", None)
        .unwrap_err();
    assert!(error.contains("127.0.0.1"), "{error}");
    assert!(error.contains("nothing was generated"), "{error}");
    let missing = std::path::Path::new("/nonexistent/cairn-ca.pem");
    let error = llm(&server)
        .complete_trusting("Summarize: tea.", Some(missing))
        .unwrap_err();
    assert!(error.contains("cannot read the CA file"), "{error}");
}
