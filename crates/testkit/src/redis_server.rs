//! A private `redis-server` on a free loopback port, persistence off, in a
//! temporary directory; killed (and its directory removed) on drop.
//!
//! The test harness starts one per test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateRedis {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl PrivateRedis {
    /// Finds `redis-server` on PATH (or /usr/bin, /usr/sbin).
    pub fn binary() -> Option<PathBuf> {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain(["/usr/bin".into(), "/usr/sbin".into()])
            .map(|d: PathBuf| d.join("redis-server"))
            .find(|p| p.is_file())
    }

    /// Starts one; the error says why not (no binary, did not answer).
    pub fn start() -> Result<PrivateRedis, String> {
        Self::start_with(&[])
    }

    /// Starts one with `extra` arguments after the usual ones.
    pub fn start_with(extra: &[String]) -> Result<PrivateRedis, String> {
        let binary = Self::binary().ok_or("redis-server is not installed")?;
        let mut last = String::new();
        // A free port can be taken between probing and binding: retry.
        for _ in 0..5 {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("edc-sync-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let child = Command::new(&binary)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = PrivateRedis { child, port, dir };
            if server.wait_ready(Duration::from_secs(10)) {
                return Ok(server);
            }
            last = format!("redis-server on port {port} did not answer PING");
        }
        Err(last)
    }

    /// Starts one that also listens with TLS on a port of its own, with
    /// the certificates in `certs`; `require_client_cert` makes it refuse
    /// clients without one (mutual TLS). Returns the server and its TLS
    /// port (the plain port stays, for readiness and inspection).
    pub fn start_tls(
        certs: &crate::tls::TestCerts,
        require_client_cert: bool,
    ) -> Result<(PrivateRedis, u16), String> {
        let tls_port = free_port()?;
        let server = Self::start_with(&certs.server_args(tls_port, require_client_cert))?;
        Ok((server, tls_port))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server abruptly (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_ready(&mut self, timeout: Duration) -> bool {
        let port = self.port;
        wait_for(&mut self.child, timeout, || ping(port))
    }
}

/// Polls `ready` until it answers true (the server is up), the server
/// process exits (it will never be), or `timeout` passes.
pub(crate) fn wait_for(child: &mut Child, timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// True if a Redis answers PING on `port` at once.
pub fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}
