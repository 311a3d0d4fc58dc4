//! Where the pacer's Redis is: one server, or a Redis Cluster, in clear or
//! over TLS.
//!
//! `redis://host:port/db` names one server (a `ConnectionManager`, which
//! reconnects). `redis+cluster://[user:pass@]host:port,host:port` names the
//! seed nodes of a cluster (a `ClusterConnection`, which follows MOVED/ASK
//! and learns the slot map). Every key the pacer touches in one call shares
//! a hash tag (docs/pacer.md, "Keys"), so each script runs on the one node
//! owning that slot, atomically, as on a single server.
//!
//! `rediss://` and `rediss+cluster://` are the same over TLS (rustls). The
//! server is verified against the system's trust store, or against the CA
//! named by the query parameter `ssl_ca_certs`; `ssl_certfile` and
//! `ssl_keyfile` (together) give a client certificate for mutual TLS. The
//! names are redis-py's, which operators of a managed Redis already know:
//! `rediss://:pw@redis.internal:6380/0?ssl_ca_certs=/etc/edc/redis-ca.pem`.

use std::path::PathBuf;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{ClientTlsConfig, Cmd, Pipeline, RedisFuture, TlsCertificates, Value};

/// The scheme that marks a list of cluster seed nodes.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";
/// The same over TLS.
pub const TLS_CLUSTER_SCHEME: &str = "rediss+cluster://";

/// TLS files named in a `rediss://` URL's query (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// `ssl_ca_certs`: the CA (PEM) the server's certificate must chain to.
    pub ca: Option<PathBuf>,
    /// `ssl_certfile` and `ssl_keyfile`: a client certificate and its key.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// Takes the TLS parameters out of a query string; the rest is given
    /// back. Each named file must be readable now (a configuration error,
    /// found before a run starts).
    fn take(query: &str) -> Result<(TlsFiles, Vec<String>), String> {
        let (mut ca, mut cert, mut key, mut rest) = (None, None, None, Vec::new());
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match name {
                "ssl_ca_certs" => &mut ca,
                "ssl_certfile" => &mut cert,
                "ssl_keyfile" => &mut key,
                // Any other TLS setting would be dropped without a word
                // (Python's `ssl_cert_reqs`, `ssl_check_hostname`): refused.
                other if other.starts_with("ssl_") || other.starts_with("tls") => {
                    return Err(format!(
                    "{other}: not a TLS parameter edc-sync takes (ssl_ca_certs, ssl_certfile, ssl_keyfile); \
                         the server's certificate is always verified"
                ))
                }
                _ => {
                    rest.push(pair.to_string());
                    continue;
                }
            };
            let path = PathBuf::from(value);
            let text = std::fs::read(&path)
                .map_err(|e| format!("{name} {}: cannot read it ({e})", path.display()))?;
            // A file that holds nothing of what it names would leave the
            // connection to fail at its first use, not at start.
            let wanted: &[u8] = match name {
                "ssl_keyfile" => b"PRIVATE KEY-----",
                _ => b"-----BEGIN CERTIFICATE-----",
            };
            if !text.windows(wanted.len()).any(|w| w == wanted) {
                return Err(format!(
                    "{name} {}: it holds no PEM {}",
                    path.display(),
                    if name == "ssl_keyfile" {
                        "private key"
                    } else {
                        "certificate"
                    }
                ));
            }
            *slot = Some(path);
        }
        let client = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => {
                return Err(
                    "ssl_certfile and ssl_keyfile go together (a client certificate and its key)".into(),
                )
            }
        };
        Ok((TlsFiles { ca, client }, rest))
    }

    /// The certificates for the client, read now; `None` when the system's
    /// trust store is all that is needed.
    fn certificates(&self) -> Result<Option<TlsCertificates>, String> {
        if self.ca.is_none() && self.client.is_none() {
            return Ok(None);
        }
        let read =
            |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: cannot read it ({e})", p.display()));
        let root_cert = self.ca.as_ref().map(read).transpose()?;
        let client_tls = match &self.client {
            Some((cert, key)) => Some(ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            None => None,
        };
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// A parsed `--redis` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Single {
        url: String,
        tls: TlsFiles,
    },
    /// Seed nodes, each as a `redis://` (or `rediss://`) URL, userinfo
    /// repeated on each.
    Cluster {
        seeds: Vec<String>,
        tls: TlsFiles,
    },
}

impl Target {
    /// Splits a cluster list into seed URLs and the TLS parameters out of a
    /// `rediss` URL; anything else is one server as given. Does not
    /// connect.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (cluster, scheme, rest) = if let Some(rest) = url.strip_prefix(CLUSTER_SCHEME) {
            (true, "redis://", rest)
        } else if let Some(rest) = url.strip_prefix(TLS_CLUSTER_SCHEME) {
            (true, "rediss://", rest)
        } else if let Some(rest) = url.strip_prefix("rediss://") {
            (false, "rediss://", rest)
        } else {
            redis::Client::open(url).map_err(|e| e.to_string())?;
            return Ok(Target::Single {
                url: url.to_string(),
                tls: TlsFiles::default(),
            });
        };
        // `#insecure` turns certificate verification off in the redis
        // crate: never taken, wherever it is written.
        if let Some((_, fragment)) = rest.split_once('#') {
            return Err(format!(
                "#{fragment}: a fragment turns the server's certificate check off, which edc-sync never does; \
                 name the CA with ssl_ca_certs instead"
            ));
        }
        let (rest, tls, options) = match rest.split_once('?') {
            Some((rest, query)) => {
                let (tls, options) = TlsFiles::take(query)?;
                (rest, tls, options)
            }
            None => (rest, TlsFiles::default(), Vec::new()),
        };
        if !cluster {
            let mut single = format!("{scheme}{rest}");
            if !options.is_empty() {
                single = format!("{single}?{}", options.join("&"));
            }
            redis::Client::open(single.as_str()).map_err(|e| e.to_string())?;
            return Ok(Target::Single { url: single, tls });
        }
        if !options.is_empty() {
            return Err("a cluster takes no options but ssl_ca_certs, ssl_certfile and ssl_keyfile".into());
        }
        let (userinfo, hosts) = match rest.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), rest),
        };
        let hosts = hosts.trim_end_matches('/');
        if hosts.contains('/') {
            return Err("a cluster has no database number: list host:port seeds only".into());
        }
        let seeds: Vec<String> = hosts
            .split(',')
            .map(|h| format!("{scheme}{userinfo}{}/", h.trim()))
            .collect();
        for seed in &seeds {
            redis::Client::open(seed.as_str()).map_err(|e| e.to_string())?;
        }
        Ok(Target::Cluster { seeds, tls })
    }
}

/// A connection to either kind of deployment; cheap to clone.
#[derive(Clone)]
pub enum Conn {
    /// One server; reconnects by itself.
    Single(ConnectionManager),
    /// A Redis Cluster; follows the slot map.
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects with `attempts` tries, each bounded by the timeouts.
    pub async fn open(
        target: &Target,
        attempts: u32,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Conn, OpenError> {
        let deadline = connect_timeout * (attempts + 1);
        let connecting = async {
            match target {
                Target::Single { url, tls } => {
                    let client = match tls.certificates()? {
                        Some(certs) => redis::Client::build_with_tls(url.as_str(), certs),
                        None => redis::Client::open(url.as_str()),
                    }
                    .map_err(|e| e.to_string())?;
                    let config = ConnectionManagerConfig::new()
                        .set_number_of_retries(attempts.saturating_sub(1) as usize)
                        .set_connection_timeout(Some(connect_timeout))
                        .set_response_timeout(Some(response_timeout));
                    ConnectionManager::new_with_config(client, config)
                        .await
                        .map(Conn::Single)
                        .map_err(|e| OpenError::of(&e))
                }
                Target::Cluster { seeds, tls } => {
                    let mut builder = ClusterClient::builder(seeds.iter().map(String::as_str));
                    if let Some(certs) = tls.certificates()? {
                        builder = builder.certs(certs);
                    }
                    let client = builder
                        .connection_timeout(connect_timeout)
                        .response_timeout(response_timeout)
                        .retries(attempts.saturating_sub(1))
                        .build()
                        .map_err(|e| e.to_string())?;
                    client
                        .get_async_connection()
                        .await
                        .map(Conn::Cluster)
                        .map_err(|e| OpenError::of(&e))
                }
            }
        };
        tokio::time::timeout(deadline, connecting)
            .await
            .map_err(|_| OpenError::Failed(format!("no connection within {deadline:?}")))?
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The server refused the client's credentials or permissions.
    Refused(String),
    /// Anything else: not reached, timed out, lost, misconfigured.
    Failed(String),
}

impl From<String> for OpenError {
    fn from(detail: String) -> OpenError {
        OpenError::Failed(detail)
    }
}

impl OpenError {
    fn of(e: &redis::RedisError) -> OpenError {
        match refused(e) {
            true => OpenError::Refused(e.to_string()),
            false => OpenError::Failed(e.to_string()),
        }
    }
}

/// Whether the server refused the client itself: its credentials (a wrong
/// password or user; none where one is required) or its ACL permissions.
pub(crate) fn refused(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// `url` with everything between `://` and the last `@` replaced by `***`,
/// whether or not it parses (a password with `/` or `@` in it can end the
/// authority early), so that no message shows a password.
pub fn without_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Target, TlsFiles};

    #[test]
    fn a_cluster_url_is_split_into_seed_nodes_with_their_credentials() {
        assert_eq!(
            Target::parse("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001/").unwrap(),
            Target::Cluster {
                seeds: vec![
                    "redis://u:p@10.0.0.1:7000/".into(),
                    "redis://u:p@10.0.0.2:7001/".into()
                ],
                tls: TlsFiles::default(),
            }
        );
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/2").unwrap(),
            Target::Single {
                url: "redis://127.0.0.1:6379/2".into(),
                tls: TlsFiles::default()
            }
        );
        assert!(
            Target::parse("redis+cluster://h:1/2").is_err(),
            "a cluster has no db 2"
        );
        assert!(Target::parse("redis+cluster://h:notaport").is_err());
        assert!(Target::parse("http://h:1").is_err());
    }

    #[test]
    fn tls_files_come_out_of_the_query_and_must_be_readable() {
        let dir = std::env::temp_dir().join(format!("edc-sync-tls-parse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "x").unwrap();
        let url = format!("rediss://:pw@h:6380/1?ssl_ca_certs={}", ca.display());
        let refused = Target::parse(&url).unwrap_err();
        assert!(refused.contains("holds no PEM certificate"), "{refused}");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").unwrap();
        assert_eq!(
            Target::parse(&url).unwrap(),
            Target::Single {
                url: "rediss://:pw@h:6380/1".into(),
                tls: TlsFiles {
                    ca: Some(ca.clone()),
                    client: None
                }
            }
        );
        let cluster = format!("rediss+cluster://h:1,g:2?ssl_ca_certs={}", ca.display());
        match Target::parse(&cluster).unwrap() {
            Target::Cluster { seeds, tls } => {
                assert_eq!(
                    seeds,
                    vec!["rediss://h:1/".to_string(), "rediss://g:2/".to_string()]
                );
                assert_eq!(tls.ca, Some(ca.clone()));
            }
            other => panic!("{other:?}"),
        }
        let missing = Target::parse("rediss://h:1/?ssl_ca_certs=/no/such/ca.pem").unwrap_err();
        assert!(missing.contains("ssl_ca_certs /no/such/ca.pem"), "{missing}");
        let half = format!("rediss://h:1/?ssl_certfile={}", ca.display());
        assert!(Target::parse(&half).unwrap_err().contains("go together"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
