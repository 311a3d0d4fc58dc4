//! A private Prometheus Pushgateway (Debian's `prometheus-pushgateway`) on
//! a free loopback port, without persistence; killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::redis_server::{free_port, wait_for};

pub struct PrivatePushgateway {
    child: Child,
    pub port: u16,
}

impl PrivatePushgateway {
    /// `prometheus-pushgateway` (Debian's name) or `pushgateway` on PATH,
    /// or the file `EDC_SYNC_PUSHGATEWAY` names.
    pub fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("EDC_SYNC_PUSHGATEWAY") {
            return Some(path.into());
        }
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain(["/usr/bin".into()])
            .flat_map(|d: PathBuf| [d.join("prometheus-pushgateway"), d.join("pushgateway")])
            .find(|p| p.is_file())
    }

    /// Starts one; the error says why not.
    pub fn start() -> Result<PrivatePushgateway, String> {
        let binary = Self::binary().ok_or(
            "prometheus-pushgateway is not installed (sudo apt-get install -y prometheus-pushgateway; scripts/test \
             does this when run as root)",
        )?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let child = Command::new(&binary)
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = PrivatePushgateway { child, port };
            let ready = move || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if wait_for(&mut server.child, Duration::from_secs(10), ready) {
                return Ok(server);
            }
            last = format!("{} on port {port} did not accept a connection", binary.display());
        }
        Err(last)
    }

    /// Its base URL, as `--metrics-push` takes it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for PrivatePushgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
