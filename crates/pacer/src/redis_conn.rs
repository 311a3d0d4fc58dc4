//! Where the pacer's Redis is: one server, or a Redis Cluster.
//!
//! `--redis redis://host:port/db` names one server (a `ConnectionManager`,
//! which reconnects). `--redis redis+cluster://[user:pass@]host:port,host:port`
//! names the seed nodes of a cluster (a `ClusterConnection`, which follows
//! MOVED/ASK and learns the slot map). Every key the pacer touches in one
//! call shares a hash tag (docs/pacer.md, "Keys"), so each script runs on
//! the one node owning that slot, atomically, as on a single server.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// The scheme that marks a list of cluster seed nodes.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

/// A parsed `--redis` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Single(String),
    /// Seed nodes, each as a `redis://` URL (userinfo repeated on each).
    Cluster(Vec<String>),
}

impl Target {
    /// Splits a `redis+cluster://` list into seed URLs; anything else is
    /// one server. Does not connect.
    pub fn parse(url: &str) -> Result<Target, String> {
        let Some(rest) = url.strip_prefix(CLUSTER_SCHEME) else {
            redis::Client::open(url).map_err(|e| e.to_string())?;
            return Ok(Target::Single(url.to_string()));
        };
        let (userinfo, hosts) = match rest.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), rest),
        };
        let hosts = hosts.trim_end_matches('/');
        if hosts.contains('/') || hosts.contains('?') {
            return Err("a cluster has no database number or options: list host:port seeds only".into());
        }
        let seeds: Vec<String> = hosts
            .split(',')
            .map(|h| format!("redis://{userinfo}{}/", h.trim()))
            .collect();
        for seed in &seeds {
            redis::Client::open(seed.as_str()).map_err(|e| e.to_string())?;
        }
        Ok(Target::Cluster(seeds))
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
    ) -> Result<Conn, String> {
        let deadline = connect_timeout * (attempts + 1);
        let connecting = async {
            match target {
                Target::Single(url) => {
                    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
                    let config = ConnectionManagerConfig::new()
                        .set_number_of_retries(attempts.saturating_sub(1) as usize)
                        .set_connection_timeout(Some(connect_timeout))
                        .set_response_timeout(Some(response_timeout));
                    ConnectionManager::new_with_config(client, config)
                        .await
                        .map(Conn::Single)
                        .map_err(|e| e.to_string())
                }
                Target::Cluster(seeds) => {
                    let client = ClusterClient::builder(seeds.iter().map(String::as_str))
                        .connection_timeout(connect_timeout)
                        .response_timeout(response_timeout)
                        .retries(attempts.saturating_sub(1))
                        .build()
                        .map_err(|e| e.to_string())?;
                    client
                        .get_async_connection()
                        .await
                        .map(Conn::Cluster)
                        .map_err(|e| e.to_string())
                }
            }
        };
        tokio::time::timeout(deadline, connecting)
            .await
            .map_err(|_| format!("no connection within {deadline:?}"))?
    }
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
    use super::Target;

    #[test]
    fn a_cluster_url_is_split_into_seed_nodes_with_their_credentials() {
        assert_eq!(
            Target::parse("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001/").unwrap(),
            Target::Cluster(vec![
                "redis://u:p@10.0.0.1:7000/".into(),
                "redis://u:p@10.0.0.2:7001/".into()
            ])
        );
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/2").unwrap(),
            Target::Single("redis://127.0.0.1:6379/2".into())
        );
        assert!(
            Target::parse("redis+cluster://h:1/2").is_err(),
            "a cluster has no db 2"
        );
        assert!(Target::parse("redis+cluster://h:notaport").is_err());
        assert!(Target::parse("http://h:1").is_err());
    }
}
