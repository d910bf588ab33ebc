//! Which TLS roots cairn's HTTPS clients trust (the HTTP embedder here, and the engine's
//! `llm.url`): Mozilla's roots (webpki), plus the certificates of one extra PEM file when
//! `CAIRN_CA_FILE` (or, failing that, `SSL_CERT_FILE`) names one — a company proxy that
//! re-signs traffic, or a test server with a certificate made on the spot. TLS is rustls with
//! the `ring` provider: no OpenSSL, no aws-lc, nothing that needs cmake.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, parse_pem};

/// The environment variables naming an extra CA file, in the order they are read.
pub const CA_FILE_VARIABLES: [&str; 2] = ["CAIRN_CA_FILE", "SSL_CERT_FILE"];

/// The extra CA file the environment names (`CAIRN_CA_FILE`, else `SSL_CERT_FILE`), if any.
pub fn ca_file_from_env() -> Option<PathBuf> {
    ca_file_from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
}

pub(crate) fn ca_file_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    CA_FILE_VARIABLES
        .iter()
        .filter_map(|name| lookup(name))
        .find(|value| !value.trim().is_empty())
        .map(|value| PathBuf::from(value.trim()))
}

/// The roots to trust: webpki's alone, or webpki's plus every certificate in `ca_file`.
/// A file that cannot be read or holds no certificate is an error naming it: trusting less
/// than asked would only fail later with a vaguer message.
pub fn root_certs(ca_file: Option<&Path>) -> Result<RootCerts, String> {
    let Some(path) = ca_file else {
        return Ok(RootCerts::WebPki);
    };
    let pem = std::fs::read(path).map_err(|error| {
        format!(
            "cannot read the CA file {} ({error}); set CAIRN_CA_FILE to a readable PEM file of certificates, or unset it to trust the built-in roots only",
            path.display()
        )
    })?;
    let mut certificates: Vec<Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .map(|der| Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let built_in = certificates.len();
    for item in parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(certificate)) => certificates.push(certificate),
            Ok(_) => {}
            Err(error) => {
                return Err(format!(
                    "the CA file {} is not valid PEM ({error}); nothing was sent",
                    path.display()
                ));
            }
        }
    }
    if certificates.len() == built_in {
        return Err(format!(
            "the CA file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----); nothing was sent",
            path.display()
        ));
    }
    Ok(RootCerts::Specific(Arc::new(certificates)))
}

/// A ureq agent for cairn's HTTPS calls: one overall timeout (connect included), HTTP error
/// statuses returned as answers, and the roots of [`root_certs`].
pub fn http_agent(
    timeout: Duration,
    ca_file: Option<&Path>,
    user_agent: &str,
) -> Result<ureq::Agent, String> {
    let tls = TlsConfig::builder()
        .root_certs(root_certs(ca_file)?)
        .build();
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout))
        .http_status_as_error(false)
        .user_agent(user_agent)
        .tls_config(tls)
        .build();
    Ok(ureq::Agent::new_with_config(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cairn_variable_wins_and_blank_values_are_unset() {
        let lookup = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        assert_eq!(ca_file_from_lookup(lookup(&[])), None);
        assert_eq!(
            ca_file_from_lookup(lookup(&[("SSL_CERT_FILE", "/a.pem")])),
            Some(PathBuf::from("/a.pem"))
        );
        assert_eq!(
            ca_file_from_lookup(lookup(&[
                ("SSL_CERT_FILE", "/a.pem"),
                ("CAIRN_CA_FILE", "/b.pem")
            ])),
            Some(PathBuf::from("/b.pem"))
        );
        assert_eq!(
            ca_file_from_lookup(lookup(&[
                ("CAIRN_CA_FILE", " "),
                ("SSL_CERT_FILE", "/a.pem")
            ])),
            Some(PathBuf::from("/a.pem"))
        );
    }

    #[test]
    fn unreadable_or_empty_ca_files_are_errors_that_name_them() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let error = root_certs(Some(&missing)).unwrap_err();
        assert!(
            error.contains("missing.pem") && error.contains("cannot read"),
            "{error}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificates here\n").unwrap();
        let error = root_certs(Some(&empty)).unwrap_err();
        assert!(error.contains("holds no PEM certificate"), "{error}");
        assert!(matches!(root_certs(None), Ok(RootCerts::WebPki)));
    }
}
