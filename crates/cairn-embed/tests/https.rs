//! Regression (issue 13, item 6): the default build refused every `https://` embedding URL.
//! A real HTTPS server on 127.0.0.1, speaking the OpenAI embeddings shape, answers the
//! embedder over TLS when its CA is trusted, and the handshake fails when it is not.

#[path = "support/https_server.rs"]
mod https_server;

use cairn_embed::{EmbedError, Embedder, HttpConfig, HttpEmbedder};
use https_server::{HttpsServer, vector_for};

fn config(server: &HttpsServer) -> HttpConfig {
    let mut config = HttpConfig::new(&server.url, "text-embedding-3-small");
    config.api_key = Some("sk-test".to_string());
    config.timeout = std::time::Duration::from_secs(60);
    config
}

#[test]
fn the_default_build_embeds_over_https_with_an_extra_ca() {
    let server = HttpsServer::start();
    let mut trusted = config(&server);
    trusted.ca_file = Some(server.ca_file().to_path_buf());
    let embedder = HttpEmbedder::new(trusted).expect("the dimension probe goes over TLS");
    assert_eq!(embedder.dimension(), 4);
    assert!(embedder.endpoint().starts_with("https://127.0.0.1:"));

    let vectors = embedder.embed_batch(&["alpha over tls", "beta"]).unwrap();
    assert_eq!(vectors.len(), 2);
    let expected = |text: &str| {
        let raw = vector_for(text);
        let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
        raw.iter().map(|x| x / norm).collect::<Vec<f32>>()
    };
    for (vector, text) in vectors.iter().zip(["alpha over tls", "beta"]) {
        let want = expected(text);
        for (got, want) in vector.iter().zip(&want) {
            assert!((got - want).abs() < 1e-5, "{text}: {vector:?} vs {want:?}");
        }
    }
    // The probe and the batch: two requests answered over TLS.
    assert_eq!(server.answered.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn an_untrusted_certificate_is_a_transport_error_not_a_silent_fallback() {
    let server = HttpsServer::start();
    // Only the built-in roots: the test CA is not among them.
    let error = HttpEmbedder::new(config(&server)).unwrap_err();
    assert!(
        !matches!(error, EmbedError::InvalidConfig { .. }),
        "https is no longer refused up front: {error}"
    );
    let text = error.to_string();
    assert!(text.contains("127.0.0.1"), "{text}");
    assert_eq!(server.answered.load(std::sync::atomic::Ordering::SeqCst), 0);
}
