//! A real `redis-server` on a free loopback port, for one test binary or
//! one test. It is stopped (and its directory removed) when dropped.
//!
//! A test that needs Redis and finds no `redis-server` fails with the
//! install command; it never skips.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a fresh server with persistence off.
    pub fn start() -> RedisServer {
        let binary = which("redis-server").unwrap_or_else(|| {
            panic!(
                "redis-server is not installed; the Redis-backed tests need a real server.\n\
                 Install it with: sudo apt-get install -y redis-server (scripts/test does this when run as root)"
            )
        });
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = tempfile::tempdir().expect("temp dir for redis");
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
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut server = RedisServer {
                child,
                port,
                _dir: dir,
            };
            if server.wait_ready(Duration::from_secs(10)) {
                return server;
            }
            last_error = format!("redis-server on port {port} did not answer PING");
            let _ = server.child.kill();
        }
        panic!("could not start redis-server: {last_error}");
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
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if ping(self.port) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}
