//! A real HTTPS server on 127.0.0.1 for the TLS regression tests (cairn-embed's embedder and
//! cairn-engine's `llm.url`): a CA and a server certificate for `127.0.0.1` made at test time
//! with rcgen, rustls (ring) on the server side, one thread, `Connection: close` answers. It
//! answers the OpenAI embeddings shape on `…/embeddings` and the chat shape on
//! `…/chat/completions`, and counts the requests it read whole. The thread ends when the
//! server is dropped (a last connection wakes the accept loop).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct HttpsServer {
    pub url: String,
    /// The PEM file of the CA that signed the server's certificate.
    pub ca_file: PathBuf,
    pub answered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// The embedding the server answers for `text`: 4 numbers from its bytes, never all zero.
pub fn vector_for(text: &str) -> Vec<f32> {
    let mut vector = [1.0f32, 0.0, 0.0, 0.0];
    for (i, byte) in text.bytes().enumerate() {
        vector[i % 4] += f32::from(byte) / 255.0;
    }
    vector.to_vec()
}

/// The chat reply the server gives.
pub const CHAT_REPLY: &str = "A summary that came back over TLS.";

impl HttpsServer {
    pub fn start() -> HttpsServer {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cairn test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate().unwrap();
        let server_params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(server_cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
            )
            .unwrap();
        let config = Arc::new(config);

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let thread = {
            let stop = stop.clone();
            let answered = answered.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    // A client that fails the handshake (an untrusted certificate) is the
                    // expected outcome of one test: the server just drops it.
                    let _ = serve_one(stream, config.clone(), &answered);
                }
            })
        };
        HttpsServer {
            url: format!("https://127.0.0.1:{port}"),
            ca_file,
            answered,
            stop,
            port,
            thread: Some(thread),
            _dir: dir,
        }
    }

    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Counts the request once it is read whole, before the answer goes out: a client that has its
/// answer always sees the count (counting after the write raced the client's own assertion).
fn serve_one(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    answered: &AtomicUsize,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let connection = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let mut reader = BufReader::new(&mut tls);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("the request ended in its headers"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            content_length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let answer = if path.ends_with("/embeddings") {
        let inputs = request["input"].as_array().cloned().unwrap_or_default();
        let data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| {
                serde_json::json!({
                    "object": "embedding",
                    "index": index,
                    "embedding": vector_for(text.as_str().unwrap_or("")),
                })
            })
            .collect();
        serde_json::json!({"object": "list", "data": data, "model": request["model"]})
    } else if path.ends_with("/chat/completions") {
        serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": CHAT_REPLY}}]})
    } else {
        serde_json::json!({"error": format!("no such path {path}")})
    };
    let answer = answer.to_string();
    answered.fetch_add(1, Ordering::SeqCst);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    );
    tls.write_all(head.as_bytes())?;
    tls.write_all(answer.as_bytes())?;
    tls.flush()?;
    tls.conn.send_close_notify();
    tls.flush()?;
    Ok(())
}
