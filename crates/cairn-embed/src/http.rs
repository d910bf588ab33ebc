//! `HttpEmbedder`: an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM,
//! LM Studio, ...).
//!
//! Request `{"model": …, "input": [...]}`, response `data[].embedding` ordered by `index`.
//! Every call is bounded by one overall timeout (default 10 s) so an unreachable or stalled
//! server can never hang a hook. `http://` and `https://` both work: TLS is rustls (ring),
//! trusting Mozilla's roots plus the extra CA file of `CAIRN_CA_FILE` / `SSL_CERT_FILE`
//! ([`crate::tls`]).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{EmbedError, Embedder, l2_normalize, truncate_utf8};

/// Default bound on one request, connect included.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach an OpenAI-compatible embeddings endpoint.
#[derive(Clone)]
pub struct HttpConfig {
    /// Base URL (`http://localhost:11434`, `http://host:8000/v1`) or the full
    /// `…/v1/embeddings` URL.
    pub url: String,
    /// The model name the server knows, e.g. `text-embedding-3-small` or `nomic-embed-text`.
    /// It is also the `model_id` recorded in the brain.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when set. Never printed.
    pub api_key: Option<String>,
    /// Bound on each request, connect included.
    pub timeout: Duration,
    /// The vector size, when known. When `None`, [`HttpEmbedder::new`] asks the server once.
    pub dimension: Option<usize>,
    /// Texts per request.
    pub batch_size: usize,
    /// Texts longer than this many bytes are cut (at a char boundary) before sending, so a
    /// huge text never turns into a "too many tokens" error. 16 KiB is ~4k tokens of English,
    /// under every common embedding model's input limit.
    pub max_input_bytes: usize,
    /// A PEM file of certificates trusted besides the built-in roots (a company proxy, a
    /// test server). [`HttpConfig::from_env`] fills it from `CAIRN_CA_FILE` / `SSL_CERT_FILE`.
    pub ca_file: Option<PathBuf>,
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .field("max_input_bytes", &self.max_input_bytes)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl HttpConfig {
    /// A config with the defaults: no key, 10 s timeout, dimension asked from the server.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        HttpConfig {
            url: url.into(),
            model: model.into(),
            api_key: None,
            timeout: DEFAULT_HTTP_TIMEOUT,
            dimension: None,
            batch_size: 64,
            max_input_bytes: 16 * 1024,
            ca_file: None,
        }
    }

    /// Reads `CAIRN_EMBED_URL`, `CAIRN_EMBED_MODEL`, `CAIRN_EMBED_API_KEY` (else
    /// `OPENAI_API_KEY`), `CAIRN_EMBED_TIMEOUT_MS`, `CAIRN_EMBED_DIM` and the extra CA file
    /// (`CAIRN_CA_FILE`, else `SSL_CERT_FILE`). `Ok(None)` when
    /// `CAIRN_EMBED_URL` is unset or empty.
    pub fn from_env() -> Result<Option<Self>, EmbedError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, EmbedError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let Some(url) = get("CAIRN_EMBED_URL") else {
            return Ok(None);
        };
        let model = get("CAIRN_EMBED_MODEL").ok_or_else(|| EmbedError::InvalidConfig {
            reason: format!(
                "CAIRN_EMBED_URL is set ({url}) but CAIRN_EMBED_MODEL is not; set it to the model name the server serves"
            ),
        })?;
        let mut config = HttpConfig::new(url.trim(), model.trim());
        config.api_key = get("CAIRN_EMBED_API_KEY").or_else(|| get("OPENAI_API_KEY"));
        if let Some(millis) = get("CAIRN_EMBED_TIMEOUT_MS") {
            let millis: u64 = millis
                .trim()
                .parse()
                .map_err(|_| EmbedError::InvalidConfig {
                    reason: format!(
                        "CAIRN_EMBED_TIMEOUT_MS={millis:?} is not a whole number of milliseconds"
                    ),
                })?;
            config.timeout = Duration::from_millis(millis);
        }
        if let Some(dimension) = get("CAIRN_EMBED_DIM") {
            let dimension: usize =
                dimension
                    .trim()
                    .parse()
                    .map_err(|_| EmbedError::InvalidConfig {
                        reason: format!(
                            "CAIRN_EMBED_DIM={dimension:?} is not a positive whole number"
                        ),
                    })?;
            config.dimension = Some(dimension);
        }
        config.ca_file = crate::tls::ca_file_from_lookup(&lookup);
        Ok(Some(config))
    }
}

/// The endpoint URL for a base URL: `…/embeddings` is used as is, `…/v1` gets
/// `/embeddings`, anything else gets `/v1/embeddings`.
fn endpoint_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/embeddings") {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/embeddings")
    } else {
        format!("{base}/v1/embeddings")
    }
}

/// Embeds through an OpenAI-compatible HTTP endpoint.
pub struct HttpEmbedder {
    config: HttpConfig,
    endpoint: String,
    dimension: usize,
    agent: ureq::Agent,
}

impl fmt::Debug for HttpEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpEmbedder")
            .field("config", &self.config)
            .field("endpoint", &self.endpoint)
            .field("dimension", &self.dimension)
            .finish()
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// Responses larger than this are refused (64 texts × 3072 dims as JSON is ~5 MB).
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

impl HttpEmbedder {
    /// Builds the client. When `config.dimension` is `None` this sends one short request to
    /// learn the vector size, so an unreachable server is reported here (within the timeout).
    pub fn new(config: HttpConfig) -> Result<Self, EmbedError> {
        let endpoint = endpoint_url(&config.url);
        let lower = endpoint.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(EmbedError::InvalidConfig {
                reason: format!("embedding URL {endpoint} must start with http:// or https://"),
            });
        }
        if config.model.trim().is_empty() {
            return Err(EmbedError::InvalidConfig {
                reason: "the embedding model name is empty".to_string(),
            });
        }
        if config.timeout.is_zero() {
            return Err(EmbedError::InvalidConfig {
                reason: "the HTTP embedding timeout must be more than 0".to_string(),
            });
        }
        let agent = crate::tls::http_agent(
            config.timeout,
            config.ca_file.as_deref(),
            concat!("cairn-embed/", env!("CARGO_PKG_VERSION")),
        )
        .map_err(|reason| EmbedError::InvalidConfig { reason })?;
        let mut embedder = HttpEmbedder {
            dimension: config.dimension.unwrap_or(0),
            config,
            endpoint,
            agent,
        };
        if embedder.dimension == 0 {
            let probe = embedder.request(&["dimension probe"])?;
            embedder.dimension = probe.first().map(Vec::len).unwrap_or(0);
            if embedder.dimension == 0 {
                return Err(EmbedError::HttpBadResponse {
                    url: embedder.endpoint.clone(),
                    reason: "the probe returned an empty embedding".to_string(),
                });
            }
        }
        Ok(embedder)
    }

    /// The full endpoint URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One request for `texts` (already capped), vectors in input order, not yet normalized
    /// or checked against the dimension.
    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = EmbeddingsRequest {
            model: &self.config.model,
            input: texts,
        };
        let body = serde_json::to_vec(&body).expect("a request always serializes");
        let mut request = self
            .agent
            .post(&self.endpoint)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request
            .send(&body[..])
            .map_err(|error| self.transport_error(error))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_string()
            .map_err(|error| self.transport_error(error))?;
        if !(200..300).contains(&status) {
            return Err(EmbedError::HttpStatus {
                url: self.endpoint.clone(),
                status,
                body: excerpt(&text),
            });
        }
        let parsed: EmbeddingsResponse =
            serde_json::from_str(&text).map_err(|error| EmbedError::HttpBadResponse {
                url: self.endpoint.clone(),
                reason: format!("{error}; body starts {}", excerpt(&text)),
            })?;
        self.in_input_order(parsed.data, texts.len())
    }

    fn in_input_order(
        &self,
        items: Vec<EmbeddingItem>,
        expected: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let bad = |reason: String| EmbedError::HttpBadResponse {
            url: self.endpoint.clone(),
            reason,
        };
        if items.len() != expected {
            return Err(bad(format!(
                "{} embeddings for {expected} inputs",
                items.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (position, item) in items.into_iter().enumerate() {
            let index = item.index.unwrap_or(position);
            match slots.get_mut(index) {
                Some(slot @ None) => *slot = Some(item.embedding),
                Some(Some(_)) => return Err(bad(format!("index {index} appears twice"))),
                None => return Err(bad(format!("index {index} is out of range"))),
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }

    fn transport_error(&self, error: ureq::Error) -> EmbedError {
        let url = self.endpoint.clone();
        match error {
            ureq::Error::Timeout(_) => EmbedError::HttpTimeout {
                url,
                timeout: self.config.timeout,
            },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                EmbedError::HttpTimeout {
                    url,
                    timeout: self.config.timeout,
                }
            }
            ureq::Error::BodyExceedsLimit(limit) => EmbedError::HttpBadResponse {
                url,
                reason: format!("the response is larger than {limit} bytes"),
            },
            other => EmbedError::HttpUnreachable {
                url,
                reason: other.to_string(),
            },
        }
    }
}

fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let cut = truncate_utf8(trimmed, 300);
    if cut.len() < trimmed.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

impl Embedder for HttpEmbedder {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.config.batch_size.max(1)) {
            // Servers reject empty strings ("input must not be empty"); one space embeds as
            // "no content", which is what an empty text means.
            let capped: Vec<&str> = chunk
                .iter()
                .map(
                    |text| match truncate_utf8(text, self.config.max_input_bytes) {
                        "" => " ",
                        cut => cut,
                    },
                )
                .collect();
            for mut vector in self.request(&capped)? {
                if vector.len() != self.dimension {
                    return Err(EmbedError::DimensionMismatch {
                        model: self.config.model.clone(),
                        expected: self.dimension,
                        actual: vector.len(),
                    });
                }
                l2_normalize(&mut vector);
                vectors.push(vector);
            }
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;
    use std::thread;
    use std::time::Instant;

    /// What the fake server saw: request line, headers (lower-cased names), body.
    struct Seen {
        request_line: String,
        headers: Vec<(String, String)>,
        body: serde_json::Value,
    }

    fn read_request(stream: &mut TcpStream) -> Seen {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let length: usize = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .map(|(_, value)| value.parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        Seen {
            request_line: request_line.trim_end().to_string(),
            headers,
            body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        }
    }

    /// Builds the fake server's answer (status, JSON body) from the request it saw.
    type Respond = Box<dyn Fn(&Seen) -> (u16, String) + Send>;

    /// Serves each response in `responses` to one connection, in order, and reports what it
    /// saw. The response is built from the request, so tests can echo the input count.
    fn serve(responses: Vec<Respond>) -> (String, mpsc::Receiver<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for respond in responses {
                let (mut stream, _) = listener.accept().unwrap();
                let seen = read_request(&mut stream);
                let (status, body) = respond(&seen);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(reply.as_bytes()).unwrap();
                let _ = sender.send(seen);
            }
        });
        (address, receiver)
    }

    /// An OpenAI-style answer: input i gets the vector [i+1, 2, 0, ...] of `dim` values,
    /// listed in reverse order so the client must sort by `index`.
    fn echo_embeddings(dim: usize) -> Respond {
        Box::new(move |seen| {
            let count = seen.body["input"].as_array().map_or(0, Vec::len);
            let data: Vec<serde_json::Value> = (0..count)
                .rev()
                .map(|i| {
                    let mut vector = vec![0.0f32; dim];
                    vector[0] = (i + 1) as f32;
                    vector[1] = 2.0;
                    serde_json::json!({"object": "embedding", "index": i, "embedding": vector})
                })
                .collect();
            let body = serde_json::json!({"object": "list", "data": data, "model": "m"});
            (200, body.to_string())
        })
    }

    fn config(url: &str, dimension: Option<usize>) -> HttpConfig {
        let mut config = HttpConfig::new(url, "test-model");
        config.dimension = dimension;
        config.timeout = Duration::from_secs(5);
        config
    }

    #[test]
    fn embeds_in_input_order_normalized_and_sends_the_openai_shape() {
        let (url, seen) = serve(vec![echo_embeddings(4)]);
        let mut config = config(&url, Some(4));
        config.api_key = Some("sk-secret".to_string());
        let embedder = HttpEmbedder::new(config).unwrap();

        let vectors = embedder.embed_batch(&["first", "second", ""]).unwrap();

        assert_eq!(vectors.len(), 3);
        for (i, vector) in vectors.iter().enumerate() {
            let mut expect = vec![(i + 1) as f32, 2.0, 0.0, 0.0];
            l2_normalize(&mut expect);
            assert_eq!(vector, &expect, "vector {i}");
        }
        let seen = seen.recv().unwrap();
        assert_eq!(seen.request_line, "POST /v1/embeddings HTTP/1.1");
        assert_eq!(seen.body["model"], "test-model");
        assert_eq!(
            seen.body["input"],
            serde_json::json!(["first", "second", " "])
        );
        assert!(
            seen.headers
                .contains(&("authorization".to_string(), "Bearer sk-secret".to_string()))
        );
        assert_eq!(embedder.model_id(), "test-model");
        assert!(
            !format!("{embedder:?}").contains("sk-secret"),
            "key never in Debug"
        );
    }

    #[test]
    fn learns_the_dimension_from_a_probe() {
        let (url, seen) = serve(vec![echo_embeddings(7)]);
        let embedder = HttpEmbedder::new(config(&format!("{url}/v1/"), None)).unwrap();
        assert_eq!(embedder.dimension(), 7);
        assert_eq!(
            seen.recv().unwrap().body["input"],
            serde_json::json!(["dimension probe"])
        );
    }

    #[test]
    fn splits_large_batches_and_caps_huge_texts() {
        let (url, seen) = serve(vec![echo_embeddings(3), echo_embeddings(3)]);
        let mut config = config(&url, Some(3));
        config.batch_size = 2;
        config.max_input_bytes = 10;
        let embedder = HttpEmbedder::new(config).unwrap();
        let huge = "word ".repeat(10_000);

        let vectors = embedder.embed_batch(&["a", "b", &huge]).unwrap();

        assert_eq!(vectors.len(), 3);
        assert_eq!(
            seen.recv().unwrap().body["input"],
            serde_json::json!(["a", "b"])
        );
        assert_eq!(
            seen.recv().unwrap().body["input"],
            serde_json::json!(["word word "])
        );
    }

    #[test]
    fn wrong_dimension_is_refused() {
        let (url, _seen) = serve(vec![echo_embeddings(5)]);
        let embedder = HttpEmbedder::new(config(&url, Some(384))).unwrap();
        let error = embedder.embed_one("x").unwrap_err();
        assert!(
            matches!(
                error,
                EmbedError::DimensionMismatch {
                    expected: 384,
                    actual: 5,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn error_status_names_the_url_and_the_key() {
        let (url, _seen) = serve(vec![Box::new(|_: &Seen| {
            (
                401,
                r#"{"error": {"message": "Incorrect API key provided"}}"#.to_string(),
            )
        })]);
        let embedder = HttpEmbedder::new(config(&url, Some(4))).unwrap();
        let error = embedder.embed_one("x").unwrap_err();
        assert!(
            matches!(error, EmbedError::HttpStatus { status: 401, .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains(&url), "{message}");
        assert!(message.contains("Incorrect API key"), "{message}");
        assert!(message.contains("CAIRN_EMBED_API_KEY"), "{message}");
        assert!(message.contains("lexical-only"), "{message}");
    }

    #[test]
    fn malformed_responses_are_bad_responses() {
        let cases: Vec<(&str, &str)> = vec![
            ("not json", "expected"),
            (
                r#"{"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]}"#,
                "appears twice",
            ),
            (
                r#"{"data": [{"embedding": [1.0], "index": 5}, {"embedding": [1.0], "index": 0}]}"#,
                "out of range",
            ),
            (r#"{"data": []}"#, "0 embeddings for 2 inputs"),
        ];
        for (body, expect) in cases {
            let body = body.to_string();
            let (url, _seen) = serve(vec![Box::new(move |_: &Seen| (200, body.clone()))]);
            let embedder = HttpEmbedder::new(config(&url, Some(1))).unwrap();
            let error = embedder.embed_batch(&["a", "b"]).unwrap_err();
            assert!(
                matches!(error, EmbedError::HttpBadResponse { .. }),
                "{error:?}"
            );
            assert!(error.to_string().contains(expect), "{expect}: {error}");
        }
    }

    #[test]
    fn a_server_that_never_answers_times_out_within_the_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accept and hold the connection without ever answering.
        let holder = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            thread::sleep(Duration::from_secs(3));
            drop(stream);
        });
        let mut config = config(&url, Some(4));
        config.timeout = Duration::from_millis(400);
        let embedder = HttpEmbedder::new(config).unwrap();

        let started = Instant::now();
        let error = embedder.embed_one("x").unwrap_err();
        let elapsed = started.elapsed();

        assert!(matches!(error, EmbedError::HttpTimeout { .. }), "{error:?}");
        assert!(elapsed < Duration::from_millis(2_000), "took {elapsed:?}");
        assert!(elapsed >= Duration::from_millis(350), "took {elapsed:?}");
        let message = error.to_string();
        assert!(
            message.contains(&url) && message.contains("lexical-only"),
            "{message}"
        );
        holder.join().unwrap();
    }

    #[test]
    fn a_closed_port_is_unreachable_at_construction() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let error = HttpEmbedder::new(config(&url, None)).unwrap_err();
        assert!(
            matches!(error, EmbedError::HttpUnreachable { .. }),
            "{error:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        let message = error.to_string();
        assert!(
            message.contains(&format!("{url}/v1/embeddings")),
            "{message}"
        );
        assert!(
            message.contains("falling back to lexical-only"),
            "{message}"
        );
    }

    #[test]
    fn endpoint_urls() {
        let check = |base: &str, expect: &str| assert_eq!(endpoint_url(base), expect, "{base}");
        check(
            "http://localhost:11434",
            "http://localhost:11434/v1/embeddings",
        );
        check(
            "http://localhost:11434/",
            "http://localhost:11434/v1/embeddings",
        );
        check("http://h:8000/v1", "http://h:8000/v1/embeddings");
        check(
            "https://api.openai.com/v1/",
            "https://api.openai.com/v1/embeddings",
        );
        check("http://h/v1/embeddings", "http://h/v1/embeddings");
        check("http://h/proxy", "http://h/proxy/v1/embeddings");
    }

    #[test]
    fn bad_configs_are_refused_before_any_request() {
        let check = |config: HttpConfig, expect: &str| {
            let error = HttpEmbedder::new(config).unwrap_err();
            assert!(
                matches!(error, EmbedError::InvalidConfig { .. }),
                "{error:?}"
            );
            assert!(error.to_string().contains(expect), "{expect}: {error}");
        };
        check(
            HttpConfig::new("localhost:11434", "m"),
            "must start with http://",
        );
        check(HttpConfig::new("http://h", " "), "model name is empty");
        let mut zero = HttpConfig::new("http://h", "m");
        zero.timeout = Duration::ZERO;
        check(zero, "timeout");
        let mut bad_ca = HttpConfig::new("https://h", "m");
        bad_ca.ca_file = Some(PathBuf::from("/nonexistent/cairn-ca.pem"));
        check(bad_ca, "cannot read the CA file");
    }

    #[test]
    fn config_from_env_values() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        assert!(HttpConfig::from_lookup(env(&[])).unwrap().is_none());
        assert!(
            HttpConfig::from_lookup(env(&[("CAIRN_EMBED_URL", "")]))
                .unwrap()
                .is_none()
        );

        let config = HttpConfig::from_lookup(env(&[
            ("CAIRN_EMBED_URL", "http://localhost:11434"),
            ("CAIRN_EMBED_MODEL", "nomic-embed-text"),
            ("OPENAI_API_KEY", "sk-fallback"),
            ("CAIRN_EMBED_TIMEOUT_MS", "2500"),
            ("CAIRN_EMBED_DIM", "768"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.model, "nomic-embed-text");
        assert_eq!(config.api_key.as_deref(), Some("sk-fallback"));
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(config.dimension, Some(768));
        assert_eq!(config.ca_file, None);
        assert!(!format!("{config:?}").contains("sk-fallback"));
        let with_ca = HttpConfig::from_lookup(env(&[
            ("CAIRN_EMBED_URL", "https://proxy.internal"),
            ("CAIRN_EMBED_MODEL", "m"),
            ("SSL_CERT_FILE", "/etc/ssl/system.pem"),
            ("CAIRN_CA_FILE", "/etc/company-ca.pem"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            with_ca.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/company-ca.pem"))
        );

        let error = HttpConfig::from_lookup(env(&[("CAIRN_EMBED_URL", "http://h")])).unwrap_err();
        assert!(error.to_string().contains("CAIRN_EMBED_MODEL"), "{error}");
        let error = HttpConfig::from_lookup(env(&[
            ("CAIRN_EMBED_URL", "http://h"),
            ("CAIRN_EMBED_MODEL", "m"),
            ("CAIRN_EMBED_TIMEOUT_MS", "soon"),
        ]))
        .unwrap_err();
        assert!(
            error.to_string().contains("CAIRN_EMBED_TIMEOUT_MS"),
            "{error}"
        );
    }
}
