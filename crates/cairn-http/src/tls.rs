//! Direct TLS (`cairn serve --tls-cert PATH --tls-key PATH`): rustls with the `ring` provider,
//! HTTP/1.1 over it. The files are read once at start-up; a file that is missing, is not PEM,
//! or a key that does not match the certificate stops the start with a message saying which.

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;

/// The certificate chain and private key, PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// The acceptor, or what is wrong with the files (nothing was started).
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        let refused = |what: String| {
            format!(
                "{what}; nothing was started — give a PEM certificate chain with --tls-cert and its PEM private key with --tls-key"
            )
        };
        std::fs::metadata(&self.cert).map_err(|e| {
            refused(format!(
                "cannot read the certificate {}: {e}",
                self.cert.display()
            ))
        })?;
        std::fs::metadata(&self.key)
            .map_err(|e| refused(format!("cannot read the key {}: {e}", self.key.display())))?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                refused(format!(
                    "{} is not a PEM certificate chain ({e})",
                    self.cert.display()
                ))
            })?;
        if chain.is_empty() {
            return Err(refused(format!(
                "{} holds no certificate (no `BEGIN CERTIFICATE` block)",
                self.cert.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| {
            refused(format!(
                "{} is not a PEM private key ({e})",
                self.key.display()
            ))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| refused(format!("TLS cannot be set up: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| {
                refused(format!(
                    "the key {} does not fit the certificate {} ({e})",
                    self.key.display(),
                    self.cert.display()
                ))
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}
