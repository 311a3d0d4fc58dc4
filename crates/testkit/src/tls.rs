//! Certificates for a TLS Redis, made by the test with the `openssl`
//! command: a CA, a server certificate for 127.0.0.1 and localhost, and a
//! client certificate for mutual TLS. EC P-256 keys (fast to make), valid
//! two days, in a directory of the caller's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PEM files one test needs.
pub struct TestCerts {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Makes the files in `dir`; the error says what failed (`openssl` missing
/// names the package to install).
pub fn make(dir: &Path) -> Result<TestCerts, String> {
    let path = |name: &str| dir.join(name);
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-days", "2", "-subj", "/CN=edc-sync test CA"],
        ]
        .concat(),
        &[("-keyout", path("ca.key")), ("-out", path("ca.crt"))],
    )?;
    for (who, san, usage) in [
        (
            // A cluster node presents its server certificate on the
            // cluster bus as a client too.
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "serverAuth,clientAuth",
        ),
        ("client", "subjectAltName=DNS:edc-sync-client", "clientAuth"),
    ] {
        let ext = path(&format!("{who}.ext"));
        std::fs::write(
            &ext,
            format!("{san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"),
        )
        .map_err(|e| format!("cannot write {}: {e}", ext.display()))?;
        openssl(
            &[&["req"][..], &ec, &["-subj", &format!("/CN=edc-sync test {who}")]].concat(),
            &[
                ("-keyout", path(&format!("{who}.key"))),
                ("-out", path(&format!("{who}.csr"))),
            ],
        )?;
        openssl(
            &["x509", "-req", "-days", "2", "-CAcreateserial"],
            &[
                ("-in", path(&format!("{who}.csr"))),
                ("-CA", path("ca.crt")),
                ("-CAkey", path("ca.key")),
                ("-extfile", ext),
                ("-out", path(&format!("{who}.crt"))),
            ],
        )?;
    }
    Ok(TestCerts {
        ca: path("ca.crt"),
        server_cert: path("server.crt"),
        server_key: path("server.key"),
        client_cert: path("client.crt"),
        client_key: path("client.key"),
    })
}

impl TestCerts {
    /// The `redis-server` arguments that serve TLS on `port` with these
    /// certificates; `require_client_cert` asks clients for theirs.
    pub fn server_args(&self, port: u16, require_client_cert: bool) -> Vec<String> {
        let path = |p: &Path| p.display().to_string();
        vec![
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            path(&self.server_cert),
            "--tls-key-file".into(),
            path(&self.server_key),
            "--tls-ca-cert-file".into(),
            path(&self.ca),
            "--tls-auth-clients".into(),
            if require_client_cert { "yes" } else { "no" }.into(),
        ]
    }
}

fn openssl(args: &[&str], files: &[(&str, PathBuf)]) -> Result<(), String> {
    let mut cmd = Command::new("openssl");
    cmd.args(args);
    for (flag, file) in files {
        cmd.arg(flag).arg(file);
    }
    let out = cmd.output().map_err(|e| {
        format!("cannot run openssl ({e}): install it (apt-get install -y openssl) to make the test's certificates")
    })?;
    if !out.status.success() {
        return Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}
