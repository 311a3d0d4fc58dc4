//! A private S3-compatible object store on a free loopback port, one
//! bucket and one key, in a temporary directory; killed (and its directory
//! removed) on drop. Two servers, both real S3 implementations that a test
//! machine gets from crates.io (`scripts/test` builds them once into
//! `~/.cache/edc-sync-tools/`):
//!
//! - **Garage** (deuxfleurs, AGPL, used only as a test tool): a production
//!   object store. It checks `x-amz-checksum-sha256` on PutObject but
//!   ignores `If-None-Match: *` (an existing object is overwritten) and has
//!   no Object Lock (501). The object-landing tests, the crash soak and
//!   OQ-032 run against it, so edc-sync's HEAD-first path is what they prove.
//! - **s3s-fs** (the s3s project's file-system server, Apache-2.0,
//!   described by its authors as experimental): it checks the SHA-256 too
//!   and honours `If-None-Match: *` (412), so the conditional-write path is
//!   proven against it. No Object Lock either.
//!
//! - **moto** (getmoto, Apache-2.0, from the Python registry, in server
//!   mode): AWS's API as a test double, with S3 Object Lock (bucket lock
//!   configuration, default retention, per-object retention, legal hold),
//!   which neither of the two above has. The Object Lock tests run
//!   against it; Garage keeps testing everything else.
//!
//! `scripts/test` installs moto into a virtual environment of its own in the
//! same cache (`moto-<version>/bin/moto_server`), beside the Python that
//! makes its bucket with boto3 (moto's own dependency).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::redis_server::{free_port, wait_for};

/// The versions `scripts/test` installs.
pub const GARAGE_VERSION: &str = "2.5.0";
pub const S3S_FS_VERSION: &str = "0.14.1";
pub const MOTO_VERSION: &str = "5.1.18";

/// The key id and secret of the test key (made up here, never real).
pub const ACCESS_KEY: &str = "GK0123456789abcdef01234567";
pub const SECRET_KEY: &str = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7";

/// The bucket every test lands in.
pub const BUCKET: &str = "landing";

pub struct PrivateS3 {
    child: Child,
    pub port: u16,
    dir: PathBuf,
    /// Which server, and its version: `Garage 2.5.0`.
    pub name: String,
    /// moto's Python, whose boto3 reads what edc-sync's client does not
    /// (an object's retention) and tries what an insider would.
    python: Option<PathBuf>,
}

/// Where a server's binary is: the variable `env`, the cache `scripts/test`
/// installs into (`<name>-<version>/bin/<name>`), or PATH.
fn binary(env: &str, name: &str, version: &str) -> Option<PathBuf> {
    let cached = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(format!(".cache/edc-sync-tools/{name}-{version}/bin/{name}")));
    std::env::var_os(env)
        .map(PathBuf::from)
        .into_iter()
        .chain(cached)
        .chain(
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .map(|d| d.join(name)),
        )
        .find(|p| p.is_file())
}

/// Starts `cmd` (a server listening on `port`, working in `dir`), its
/// log in `dir/server.log`, and waits for it to answer; the error carries
/// the log.
fn launch(mut cmd: Command, port: u16, dir: PathBuf, name: String) -> Result<PrivateS3, String> {
    let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
    let child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let mut server = PrivateS3 {
        child,
        port,
        dir,
        name,
        python: None,
    };
    if server.wait_ready(Duration::from_secs(20)) {
        return Ok(server);
    }
    Err(format!(
        "{} on port {port} did not answer: {}",
        server.name,
        std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default()
    ))
}

/// Why a server cannot start, and how to install it.
fn not_installed(env: &str, name: &str, version: &str, features: &str) -> String {
    format!(
        "{name} is not installed: scripts/test installs it with `cargo install --locked {name} --version {version} \
         --debug {features} --root ~/.cache/edc-sync-tools/{name}-{version}` (or set {env} to a {name} binary)"
    )
}

impl PrivateS3 {
    /// Starts an s3s-fs; the error says why not and how to install it.
    pub fn s3s_fs() -> Result<PrivateS3, String> {
        let binary = binary("EDC_SYNC_S3S_FS", "s3s-fs", S3S_FS_VERSION)
            .ok_or_else(|| not_installed("EDC_SYNC_S3S_FS", "s3s-fs", S3S_FS_VERSION, "--features binary"))?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("edc-sync-s3s-fs-{}-{port}", std::process::id()));
            // A bucket is a directory of the root.
            std::fs::create_dir_all(dir.join("root").join(BUCKET))
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let mut cmd = Command::new(&binary);
            cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(dir.join("root"));
            match launch(cmd, port, dir, format!("s3s-fs {S3S_FS_VERSION}")) {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Starts a Garage; the error says why not and how to install it.
    pub fn garage() -> Result<PrivateS3, String> {
        let features = "--no-default-features --features bundled-libs,lmdb";
        let binary = binary("EDC_SYNC_GARAGE", "garage", GARAGE_VERSION)
            .ok_or_else(|| not_installed("EDC_SYNC_GARAGE", "garage", GARAGE_VERSION, features))?;
        let mut last = String::new();
        for _ in 0..5 {
            let (port, rpc) = (free_port()?, free_port()?);
            let dir = std::env::temp_dir().join(format!("edc-sync-garage-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let config = dir.join("garage.toml");
            let text = format!(
                "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"lmdb\"\n\
                 replication_factor = 1\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
                 rpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{secret}\"\n\
                 [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{port}\"\n\
                 root_domain = \".s3.localhost\"\n",
                d = dir.display(),
                secret = "0123456789abcdef".repeat(4),
            );
            write_private(&config, &text)?;
            let mut cmd = Command::new(&binary);
            cmd.arg("-c")
                .arg(&config)
                .args(["server", "--single-node", "--default-bucket"])
                .env("GARAGE_DEFAULT_ACCESS_KEY", ACCESS_KEY)
                .env("GARAGE_DEFAULT_SECRET_KEY", SECRET_KEY)
                .env("GARAGE_DEFAULT_BUCKET", BUCKET);
            match launch(cmd, port, dir, format!("Garage {GARAGE_VERSION}")) {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Starts a moto server with the bucket made: with `object_lock`,
    /// Object Lock enabled, and `default` (mode as S3 spells it, days) its
    /// default retention if given; without, a bucket that cannot lock.
    /// The error says why not and how to install it.
    pub fn moto(object_lock: bool, default: Option<(&str, u32)>) -> Result<PrivateS3, String> {
        let binary = binary("EDC_SYNC_MOTO", "moto_server", "")
            .filter(|p| p.is_file())
            .or_else(|| {
                std::env::var_os("HOME").map(|h| {
                    PathBuf::from(h).join(format!(".cache/edc-sync-tools/moto-{MOTO_VERSION}/bin/moto_server"))
                })
            })
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "moto is not installed: scripts/test installs it with `python3 -m venv \
                     ~/.cache/edc-sync-tools/moto-{MOTO_VERSION} && ~/.cache/edc-sync-tools/moto-{MOTO_VERSION}/bin/pip \
                     install 'moto[server]=={MOTO_VERSION}'` (or set EDC_SYNC_MOTO to its moto_server)"
                )
            })?;
        let python = binary.with_file_name("python3");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("edc-sync-moto-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let mut cmd = Command::new(&binary);
            cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
            let mut server = match launch(cmd, port, dir, format!("moto {MOTO_VERSION}")) {
                Ok(server) => server,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let rule = match default {
                Some((mode, days)) => format!(
                    "s3.put_object_lock_configuration(Bucket='{BUCKET}', ObjectLockConfiguration={{\
                     'ObjectLockEnabled': 'Enabled', 'Rule': {{'DefaultRetention': {{'Mode': '{mode}', 'Days': {days}}}}}}})\n"
                ),
                None => String::new(),
            };
            let script = format!(
                "import boto3\n\
                 s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='{ACCESS_KEY}', \
                 aws_secret_access_key='{SECRET_KEY}', region_name='us-east-1')\n\
                 s3.create_bucket(Bucket='{BUCKET}', ObjectLockEnabledForBucket={})\n{rule}",
                server.endpoint(),
                if object_lock { "True" } else { "False" },
            );
            let made = Command::new(&python)
                .args(["-c", &script])
                .output()
                .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
            if !made.status.success() {
                return Err(format!(
                    "moto: making the bucket failed: {}",
                    String::from_utf8_lossy(&made.stderr)
                ));
            }
            server.python = Some(python);
            return Ok(server);
        }
        Err(last)
    }

    /// Runs `body` with boto3 (moto's own client, independent of
    /// edc-sync's) bound to `s3`; its stdout. Only a moto server has it.
    fn boto3(&self, body: &str) -> anyhow::Result<String> {
        let python = self
            .python
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("{} has no boto3 beside it (only moto does)", self.name))?;
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='{ACCESS_KEY}', \
             aws_secret_access_key='{SECRET_KEY}', region_name='us-east-1')\n{body}",
            self.endpoint()
        );
        let out = Command::new(python).args(["-c", &script]).output()?;
        anyhow::ensure!(
            out.status.success(),
            "boto3: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The retention of the object at `key` as S3 reports it (mode,
    /// retain-until date), read with boto3; `None` when it has none.
    pub fn retention(&self, key: &str) -> anyhow::Result<Option<(String, String)>> {
        let text = self.boto3(&format!(
            "h = s3.head_object(Bucket='{BUCKET}', Key={key:?})\n\
             if 'ObjectLockMode' in h: print(h['ObjectLockMode'], h['ObjectLockRetainUntilDate'].isoformat())"
        ))?;
        Ok(text
            .split_once(' ')
            .map(|(mode, until)| (mode.to_string(), until.to_string())))
    }

    /// Tries to delete the stored version of the object at `key` for good,
    /// as an insider with the bucket's keys would (boto3's DeleteObject
    /// with its VersionId): `Ok(())` if S3 deleted it, else S3's refusal.
    pub fn delete_version(&self, key: &str) -> anyhow::Result<Result<(), String>> {
        let text = self.boto3(&format!(
            "v = s3.head_object(Bucket='{BUCKET}', Key={key:?})['VersionId']\n\
             try:\n    s3.delete_object(Bucket='{BUCKET}', Key={key:?}, VersionId=v)\n    print('deleted')\n\
             except Exception as e:\n    print(str(e))"
        ))?;
        Ok(match text.as_str() {
            "deleted" => Ok(()),
            refused => Err(refused.to_string()),
        })
    }

    /// The endpoint, as `AWS_ENDPOINT_URL` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `s3://landing/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// The standard AWS environment that reaches this server with the
    /// test key: what an operator sets for a real bucket.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "garage".into()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Copies every object below `prefix` into `to`, as a local landing
    /// lays them out: each stream's `manifest/<line>.json` objects are
    /// joined, in name order, into its `manifest.jsonl`. Read with the
    /// `object_store` client directly, so what a test then checks was not
    /// read by edc-sync's own code.
    pub async fn download(&self, prefix: &str, to: &std::path::Path) -> anyhow::Result<usize> {
        use futures_util::TryStreamExt;
        use object_store::{ObjectStore, ObjectStoreExt};
        let store = self.client()?;
        let root = object_store::path::Path::from(prefix);
        let mut metas: Vec<_> = store.list(Some(&root)).try_collect().await?;
        metas.sort_by(|a, b| a.location.cmp(&b.location));
        for meta in &metas {
            let key = meta.location.to_string();
            let rel = key.strip_prefix(&format!("{prefix}/")).unwrap_or(&key);
            let bytes = store.get(&meta.location).await?.bytes().await?;
            match rel.rsplit_once("/manifest/") {
                Some((dir, _)) => {
                    use std::io::Write;
                    let dir = to.join(dir);
                    std::fs::create_dir_all(&dir)?;
                    let mut manifest = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join("manifest.jsonl"))?;
                    manifest.write_all(&bytes)?;
                }
                None => {
                    let file = to.join(rel);
                    std::fs::create_dir_all(file.parent().unwrap_or(to))?;
                    std::fs::write(file, &bytes)?;
                }
            }
        }
        Ok(metas.len())
    }

    /// Writes `bytes` at `key` of the bucket, as an insider with write
    /// access would.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        use object_store::ObjectStoreExt;
        let key = object_store::path::Path::from(key);
        self.client()?.put(&key, bytes.into()).await?;
        Ok(())
    }

    /// Deletes the object at `key`, as an insider with write access would.
    pub async fn delete(&self, key: &str) -> anyhow::Result<()> {
        use object_store::ObjectStoreExt;
        let key = object_store::path::Path::from(key);
        self.client()?.delete(&key).await?;
        Ok(())
    }

    /// The names of the objects under `prefix`, in name order.
    pub async fn names(&self, prefix: &str) -> anyhow::Result<Vec<String>> {
        use futures_util::TryStreamExt;
        use object_store::ObjectStore;
        let root = object_store::path::Path::from(prefix);
        let metas: Vec<_> = self.client()?.list(Some(&root)).try_collect().await?;
        let mut names: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
        names.sort();
        Ok(names)
    }

    fn client(&self) -> anyhow::Result<object_store::aws::AmazonS3> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_region("garage")
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()?)
    }

    /// Stops the server abruptly (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_ready(&mut self, timeout: Duration) -> bool {
        let port = self.port;
        // The default bucket and key exist before the S3 API listens.
        wait_for(&mut self.child, timeout, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
    }
}

impl Drop for PrivateS3 {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Garage refuses a configuration holding its RPC secret that others can
/// read.
fn write_private(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
