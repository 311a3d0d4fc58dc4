//! TLS to the state database, as libpq's URL names it: `sslmode`
//! (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`),
//! `sslrootcert` (or the variable `PGSSLROOTCERT`), `sslcert` and `sslkey`.
//!
//! Whenever TLS is used the server's certificate is verified, chain and
//! host name, against `sslrootcert` or else the system's trust store:
//! `require` and `verify-ca` are held to what `verify-full` means, since a
//! connection to an unverified server carries the run's password and the
//! evidence. `prefer` (libpq's default, and the default here) uses TLS when
//! the server offers it and plain TCP when it does not; give
//! `sslmode=verify-full` to refuse plain TCP.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What the URL asked of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    /// `require`, `verify-ca`, `verify-full`: TLS, verified, or no connection.
    Require,
}

/// The URL's TLS settings, taken out of its query.
#[derive(Debug, Clone)]
pub(crate) struct Tls {
    pub mode: Mode,
    root: Option<PathBuf>,
    client: Option<(PathBuf, PathBuf)>,
}

impl Tls {
    /// Takes `sslmode`, `sslrootcert`, `sslcert` and `sslkey` out of the
    /// URL `text`; returns the URL without them (for the client's own
    /// parser) and the settings. Each named file must be readable now.
    pub(crate) fn take(text: &str) -> Result<(String, Tls), String> {
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        let mut tls = Tls {
            mode: Mode::Prefer,
            root: std::env::var_os("PGSSLROOTCERT").map(PathBuf::from),
            client: None,
        };
        let (mut cert, mut key, mut rest) = (None, None, Vec::new());
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "sslmode" => {
                    tls.mode = match value {
                        "disable" => Mode::Disable,
                        "allow" | "prefer" => Mode::Prefer,
                        "require" | "verify-ca" | "verify-full" => Mode::Require,
                        other => {
                            return Err(format!(
                            "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                        ))
                        }
                    }
                }
                "sslrootcert" => tls.root = Some(readable("sslrootcert", value)?),
                "sslcert" => cert = Some(readable("sslcert", value)?),
                "sslkey" => key = Some(readable("sslkey", value)?),
                // A query is copied wherever the URL is (the run header's
                // command line among them): no password goes there.
                "password" => {
                    return Err(
                        "a password in the URL's query would be copied wherever the URL is; give it as \
                                the URL's user info in EDC_SYNC_STATE, or in PGPASSWORD"
                            .into(),
                    )
                }
                _ => rest.push(pair),
            }
        }
        tls.client = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err("sslcert and sslkey go together (a client certificate and its key)".into()),
        };
        let url = match rest.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", rest.join("&")),
        };
        Ok((url, tls))
    }

    /// The rustls connector: the server verified against `sslrootcert` or
    /// the system's trust store, and the client certificate if any.
    pub(crate) fn connector(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.root {
            Some(path) => {
                for cert in
                    CertificateDer::pem_file_iter(path).map_err(|e| pem_error("sslrootcert", path, e))?
                {
                    let cert = cert.map_err(|e| pem_error("sslrootcert", path, e))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let config = match &self.client {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| pem_error("sslcert", cert, e))?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error("sslkey", key, e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("sslcert/sslkey: {e}"))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

fn readable(name: &str, value: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(value);
    crate::no_follow::operator_input(&path)
        .map_err(|e| format!("{name} {}: cannot read it ({e})", path.display()))?;
    Ok(path)
}

fn pem_error(name: &str, path: &std::path::Path, e: rustls::pki_types::pem::Error) -> String {
    format!(
        "{name} {}: not a PEM file this client reads ({e})",
        path.display()
    )
}
