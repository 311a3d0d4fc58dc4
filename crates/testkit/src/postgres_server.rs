//! A private PostgreSQL on a free loopback port: `initdb` into a temporary
//! directory, `pg_ctl start`, and on drop `pg_ctl stop -m immediate` and
//! the directory removed. No mock: the tests of a PostgreSQL state talk to
//! the real server the machine image ships (PostgreSQL 15, not running).
//!
//! PostgreSQL refuses to run as root, so under root (CI) the server runs as
//! the unprivileged `postgres` account the Debian package creates, through
//! `runuser`; otherwise as the current user.
//!
//! Two roles are made: the superuser `edc_owner` that owns the schema (what
//! `edc-sync state migrate` runs as) and `edc_run`, a plain login role that
//! a run uses, given only what the migration grants it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::postgres_session::Session;
use crate::redis_server::free_port;

/// Where the server binaries are looked for, newest first.
const BIN_DIRS: [&str; 2] = ["/usr/lib/postgresql/15/bin", "/usr/local/bin"];

/// The password of both test roles (loopback only, a throwaway cluster).
pub const PASSWORD: &str = "edc-test-password";

pub struct PrivatePostgres {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    /// Run the server's tools as this account (`runuser -u`), under root.
    run_as: Option<String>,
    stopped: bool,
    /// With [`Self::keep_sessions`]: one open connection a role and
    /// database, which [`Self::psql_as`] uses instead of starting `psql`.
    sessions: Option<Mutex<HashMap<(String, String), Session>>>,
}

impl PrivatePostgres {
    /// The directory holding `initdb` and `pg_ctl`, if installed.
    pub fn bin_dir() -> Option<PathBuf> {
        std::env::var_os("EDC_SYNC_PG_BIN")
            .map(PathBuf::from)
            .into_iter()
            .chain(BIN_DIRS.iter().map(PathBuf::from))
            .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    }

    /// Starts one; the error says why not and how to install it.
    pub fn start() -> Result<PrivatePostgres, String> {
        Self::start_with(&[])
    }

    /// Starts one with `settings` (`name=value`) added to postgresql.conf.
    pub fn start_with(settings: &[&str]) -> Result<PrivatePostgres, String> {
        Self::start_edc(settings, None)
    }

    /// Starts one with the schema owner, the run role and database `edc`.
    fn start_edc(settings: &[&str], tls: Option<&crate::tls::TestCerts>) -> Result<PrivatePostgres, String> {
        let server = Self::start_as("edc_owner", settings, tls)?;
        server.psql_owner(&format!("CREATE ROLE edc_run LOGIN PASSWORD '{PASSWORD}'"))?;
        server.psql_owner("CREATE DATABASE edc OWNER edc_owner")?;
        Ok(server)
    }

    /// Starts one that speaks TLS with `certs`'s server certificate and
    /// accepts the run role `edc_run` over TLS only (a `hostnossl ...
    /// reject` line first in pg_hba.conf), so a client that connects
    /// proves it spoke TLS.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Result<PrivatePostgres, String> {
        let server = Self::start_edc(&[], Some(certs))?;
        let hba = server.data_dir().join("pg_hba.conf");
        let rules =
            std::fs::read_to_string(&hba).map_err(|e| format!("cannot read {}: {e}", hba.display()))?;
        std::fs::write(&hba, format!("hostnossl all edc_run all reject\n{rules}"))
            .map_err(|e| format!("cannot write {}: {e}", hba.display()))?;
        server.psql_owner("SELECT pg_reload_conf()")?;
        Ok(server)
    }

    /// Starts one whose only role is the superuser `db_admin` (password
    /// [`PASSWORD`]) and whose only databases are the initial ones: for
    /// running a set-up as an operator would, from the beginning.
    pub fn start_bare() -> Result<PrivatePostgres, String> {
        Self::start_as("db_admin", &[], None)
    }

    /// Starts one whose superuser is `superuser`; with `tls`, the server's
    /// certificate and key are copied into its own directory (removed with
    /// it on drop) and TLS is switched on.
    fn start_as(
        superuser: &str,
        settings: &[&str],
        tls: Option<&crate::tls::TestCerts>,
    ) -> Result<PrivatePostgres, String> {
        let bin = Self::bin_dir().ok_or(
            "PostgreSQL 15 (initdb, pg_ctl) is not installed; install it with: sudo apt-get install -y postgresql-15",
        )?;
        let run_as = is_root().then(|| "postgres".to_string());
        let dir = new_dir()?;
        let mut server = PrivatePostgres {
            port: 0,
            dir,
            bin,
            run_as,
            stopped: true,
            sessions: None,
        };
        if let Some(user) = &server.run_as {
            chown(&server.dir, user)?;
        }
        let pwfile = server.dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).map_err(|e| format!("cannot write {}: {e}", pwfile.display()))?;
        if let Some(user) = &server.run_as {
            chown(&pwfile, user)?;
        }
        let data = server.data_dir();
        server.tool(
            "initdb",
            &[
                "-D",
                path_str(&data)?,
                "-U",
                superuser,
                "--pwfile",
                path_str(&pwfile)?,
                "-A",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let mut conf = format!(
            "listen_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = on\n",
            server.dir.display()
        );
        for s in settings {
            conf.push_str(s);
            conf.push('\n');
        }
        if let Some(certs) = tls {
            conf.push_str(&server.install_certs(certs)?);
        }
        append(&data.join("postgresql.conf"), &conf)?;
        server.start_on_a_free_port()?;
        Ok(server)
    }

    /// Starts the server on a free port, picked right before it binds;
    /// another port when something took that one in between (a test's
    /// outgoing connection can be given any free port).
    fn start_on_a_free_port(&mut self) -> Result<(), String> {
        let conf = self.data_dir().join("postgresql.conf");
        let mut tries = 0;
        loop {
            self.port = free_port()?;
            // A later line wins: each try names its own port.
            append(&conf, &format!("port = {}\n", self.port))?;
            match self.restart() {
                Err(e) if e.contains("Address already in use") && tries < 4 => tries += 1,
                started => return started,
            }
        }
    }

    /// Copies `certs`'s server certificate and key into the server's
    /// directory, readable by the server's account only; returns the
    /// postgresql.conf lines that switch TLS on with them.
    fn install_certs(&self, certs: &crate::tls::TestCerts) -> Result<String, String> {
        let (cert, key) = (self.dir.join("server.crt"), self.dir.join("server.key"));
        for (from, to) in [(&certs.server_cert, &cert), (&certs.server_key, &key)] {
            std::fs::copy(from, to).map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
            if let Some(user) = &self.run_as {
                chown(to, user)?;
            }
        }
        let ok = Command::new("chmod")
            .arg("0600")
            .arg(&key)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!("cannot chmod 0600 {}", key.display()));
        }
        Ok(format!(
            "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
            cert.display(),
            key.display()
        ))
    }

    /// The URL of the schema owner (a superuser), database `edc`.
    pub fn owner_url(&self) -> String {
        format!("postgres://edc_owner:{PASSWORD}@127.0.0.1:{}/edc", self.port)
    }

    /// The URL of the run role, database `edc`.
    pub fn run_url(&self) -> String {
        format!("postgres://edc_run:{PASSWORD}@127.0.0.1:{}/edc", self.port)
    }

    /// Creates the edc-sync schema with `exe state migrate` as the owner,
    /// granting `edc_run` what runs need; returns what it printed.
    pub fn migrate_with(&self, exe: &Path) -> Result<String, String> {
        let out = Command::new(exe)
            .args([
                "state",
                "migrate",
                "--state",
                &self.owner_url(),
                "--grant-to",
                "edc_run",
            ])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "state migrate: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(text)
    }

    /// The postmaster's process id (the first line of postmaster.pid).
    pub fn postmaster_pid(&self) -> Result<u32, String> {
        let file = self.data_dir().join("postmaster.pid");
        std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{} holds no pid", file.display()))
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Runs `sql` with `psql` as the schema owner in database `postgres`.
    pub fn psql_owner(&self, sql: &str) -> Result<String, String> {
        self.psql("postgres", sql)
    }

    /// Runs `sql` with `psql` as the schema owner in `db`; returns stdout.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        self.psql_as("edc_owner", db, sql)
    }

    /// From now on [`Self::psql_as`] keeps a connection open for each
    /// role and database and answers as `psql` would, without starting
    /// it: for a test that runs thousands of small statements. Only for a
    /// server without TLS and whose roles' settings the test leaves alone
    /// (an open session keeps the settings it started with).
    pub fn keep_sessions(&mut self) {
        self.sessions.get_or_insert_with(Default::default);
    }

    /// Runs `sql` with `psql` as `user` (a role of this server whose
    /// password is [`PASSWORD`]) in `db`; returns stdout, or stderr.
    pub fn psql_as(&self, user: &str, db: &str, sql: &str) -> Result<String, String> {
        if let Some(sessions) = &self.sessions {
            let mut sessions = sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let key = (user.to_string(), db.to_string());
            // A session whose connection is gone (the server restarted)
            // is opened again, once, and the statement sent again: one
            // whose commit reached the server just before the connection
            // dropped would run twice, which no caller here risks (the
            // insider never restarts its server mid-statement).
            for _ in 0..2 {
                let session = match sessions.entry(key.clone()) {
                    std::collections::hash_map::Entry::Occupied(open) => open.into_mut(),
                    std::collections::hash_map::Entry::Vacant(none) => {
                        none.insert(Session::open(self.port, user, PASSWORD, db)?)
                    }
                };
                match session.run(sql) {
                    Some(answer) => return answer,
                    None => {
                        sessions.remove(&key);
                    }
                }
            }
            return Err(format!(
                "psql {sql:?}: the connection as {user} to {db} closed twice"
            ));
        }
        let psql = ["psql", "/usr/bin/psql"]
            .into_iter()
            .map(PathBuf::from)
            .map(|p| if p.is_absolute() { p } else { self.bin.join(p) })
            .find(|p| p.is_file())
            .ok_or("psql is not installed")?;
        let out = Command::new(psql)
            .args([
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
            ])
            .arg(self.port.to_string())
            .args(["-U", user, "-d", db, "-c", sql])
            .env("PGPASSWORD", PASSWORD)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "psql {sql:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Stops the server abruptly (`pg_ctl stop -m immediate`: no
    /// checkpoint, as a crash or a lost host would leave it).
    pub fn stop(&mut self) {
        if !self.stopped {
            let data = self.data_dir();
            if let Some(data) = data.to_str() {
                let _ = self.tool("pg_ctl", &["-D", data, "-m", "immediate", "-w", "stop"]);
            }
            self.stopped = true;
        }
    }

    /// Starts it (again, after [`Self::stop`]: same port and data).
    pub fn restart(&mut self) -> Result<(), String> {
        let data = self.data_dir();
        let log = self.dir.join("server.log");
        self.tool(
            "pg_ctl",
            &[
                "-D",
                path_str(&data)?,
                "-l",
                path_str(&log)?,
                "-w",
                "-t",
                "30",
                "start",
            ],
        )?;
        self.stopped = false;
        Ok(())
    }

    /// A copy of the whole cluster as a file-level backup takes it: the
    /// server stopped cleanly, its data directory copied (ownership kept)
    /// to `backup`, the server started again.
    pub fn back_up_to(&mut self, backup: &Path) -> Result<(), String> {
        self.stop_cleanly()?;
        copy_tree(&self.data_dir(), backup)?;
        self.restart()
    }

    /// The cluster restored from a backup [`Self::back_up_to`] took: the
    /// server stopped, its data directory replaced by the copy, started.
    pub fn restore_from(&mut self, backup: &Path) -> Result<(), String> {
        self.stop_cleanly()?;
        let data = self.data_dir();
        std::fs::remove_dir_all(&data).map_err(|e| format!("cannot remove {}: {e}", data.display()))?;
        copy_tree(backup, &data)?;
        self.restart()
    }

    fn stop_cleanly(&mut self) -> Result<(), String> {
        let data = self.data_dir();
        self.tool("pg_ctl", &["-D", path_str(&data)?, "-m", "fast", "-w", "stop"])?;
        self.stopped = true;
        Ok(())
    }

    /// A hot standby of this server (`pg_basebackup -R`, streaming from
    /// it) on a port of its own: a read-only replica, as an operator might
    /// give by mistake.
    pub fn standby(&self) -> Result<PrivatePostgres, String> {
        let dir = new_dir()?;
        let mut standby = PrivatePostgres {
            port: 0,
            dir,
            bin: self.bin.clone(),
            run_as: self.run_as.clone(),
            stopped: true,
            sessions: None,
        };
        if let Some(user) = &standby.run_as {
            chown(&standby.dir, user)?;
        }
        let data = standby.data_dir();
        let out = standby
            .program("pg_basebackup")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "edc_owner",
                "-c",
                "fast",
                "-R",
                "-D",
            ])
            .arg(&data)
            .env("PGPASSWORD", PASSWORD)
            .current_dir(&standby.dir)
            .output()
            .map_err(|e| format!("cannot run pg_basebackup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pg_basebackup: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        append(
            &data.join("postgresql.conf"),
            &format!(
                "unix_socket_directories = '{}'\nhot_standby = on\n",
                standby.dir.display()
            ),
        )?;
        standby.start_on_a_free_port()?;
        Ok(standby)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server's program `name`, run as the server's account.
    fn program(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        }
    }

    fn tool(&self, name: &str, args: &[&str]) -> Result<(), String> {
        let program = self.bin.join(name);
        let out = self
            .program(name)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{name} failed: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim(),
                self.log()
            ));
        }
        Ok(())
    }
}

/// A new, empty directory for one server of this process.
fn new_dir() -> Result<PathBuf, String> {
    static SERVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("edc-sync-pg-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        // The sessions close before the server stops under them.
        self.sessions.take();
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (at most `timeout`) until something accepts TCP on `port`.
pub fn wait_port(port: u16, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn is_root() -> bool {
    // Read through `id -u`, which keeps this crate free of libc.
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn chown(path: &Path, user: &str) -> Result<(), String> {
    let ok = Command::new("chown")
        .args(["-R", user])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!("cannot chown {} to {user}", path.display()))
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `cp -a from to`: the tree with its owners and modes (the data
/// directory must stay the server account's, mode 0700).
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("cannot run cp: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "cp -a {} {} failed: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("{} is not UTF-8", p.display()))
}
