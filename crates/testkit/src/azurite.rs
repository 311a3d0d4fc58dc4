//! A private Azurite (Microsoft's Azure Storage emulator, from the npm
//! registry) on a free loopback port, blob service only, with one
//! container made by Microsoft's own client (`@azure/storage-blob`); killed
//! (and its directory removed) on drop. `scripts/test` installs both npm
//! packages once into `~/.cache/edc-sync-tools/azurite-<version>/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::redis_server::{free_port, wait_for};

/// The version `scripts/test` installs.
pub const VERSION: &str = "3.37.0";

/// The container every test lands in.
pub const CONTAINER: &str = "landing";

pub struct PrivateAzurite {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

/// Where the npm packages are: `EDC_SYNC_AZURITE` (a directory holding
/// `node_modules`) or the cache `scripts/test` installs into.
fn packages() -> Option<PathBuf> {
    std::env::var_os("EDC_SYNC_AZURITE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(format!(".cache/edc-sync-tools/azurite-{VERSION}")))
        })
        .filter(|d| d.join("node_modules/.bin/azurite-blob").is_file())
}

impl PrivateAzurite {
    /// Starts one and makes the container; the error says why not and how
    /// to install it.
    pub fn start() -> Result<PrivateAzurite, String> {
        let root = packages().ok_or(format!(
            "azurite is not installed: scripts/test installs it with `npm install --prefix \
             ~/.cache/edc-sync-tools/azurite-{VERSION} azurite@{VERSION} @azure/storage-blob@12` (Node.js and \
             npm from the machine), or set EDC_SYNC_AZURITE to a directory holding those node_modules"
        ))?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("edc-sync-azurite-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let child = Command::new(root.join("node_modules/.bin/azurite-blob"))
            .args([
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
                "--silent",
            ])
            .args(["--skipApiVersionCheck", "--location"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start azurite-blob: {e}"))?;
        let mut server = PrivateAzurite { child, port, dir };
        if !wait_for(&mut server.child, Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        }) {
            return Err(format!("azurite on port {port} did not answer"));
        }
        let script = format!(
            "const {{ BlobServiceClient }} = require('@azure/storage-blob');\
             const c = BlobServiceClient.fromConnectionString('{}');\
             c.getContainerClient('{CONTAINER}').createIfNotExists()\
             .then(() => process.exit(0)).catch(e => {{ console.error(e.message); process.exit(1); }});",
            server.connection_string()
        );
        let made = Command::new("node")
            .arg("-e")
            .arg(script)
            .env("NODE_PATH", root.join("node_modules"))
            .output()
            .map_err(|e| format!("cannot run node: {e}"))?;
        if !made.status.success() {
            return Err(format!(
                "could not create the container: {}",
                String::from_utf8_lossy(&made.stderr)
            ));
        }
        Ok(server)
    }

    /// The emulator's well-known development account (public, never real).
    fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=\
             Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;\
             BlobEndpoint={}/devstoreaccount1;",
            self.endpoint()
        )
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `az://landing/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("az://{CONTAINER}/{prefix}")
    }

    /// The environment `object_store` reads for the emulator.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
            ("AZURITE_BLOB_STORAGE_URL", self.endpoint()),
        ]
    }
}

impl Drop for PrivateAzurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
