//! A private three-master Redis Cluster on loopback, for the tests that
//! prove the hash-tag key design: three
//! `redis-server --cluster-enabled yes`, joined by
//! `redis-cli --cluster create`, killed on drop.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis_server::{free_port, PrivateRedis};

/// How edc-sync and its pacer name a cluster's seed nodes.
const CLUSTER_SCHEME: &str = "redis+cluster://";

pub struct PrivateCluster {
    nodes: Vec<PrivateRedis>,
    /// Each node's TLS port, for a cluster started with TLS.
    tls_ports: Vec<u16>,
}

impl PrivateCluster {
    /// Starts three masters and creates the cluster (16384 slots split
    /// three ways); the error says why not.
    pub fn start() -> Result<PrivateCluster, String> {
        Self::start_nodes(None)
    }

    /// The same, each node also listening with TLS and the cluster bus
    /// over TLS (`tls-cluster yes`, so nodes announce their TLS ports),
    /// with the certificates in `certs`.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Result<PrivateCluster, String> {
        Self::start_nodes(Some(certs))
    }

    fn start_nodes(tls: Option<&crate::tls::TestCerts>) -> Result<PrivateCluster, String> {
        let mut nodes = Vec::new();
        let mut tls_ports = Vec::new();
        for _ in 0..3 {
            // The cluster bus gets a port of its own: the default (port +
            // 10000) may be past 65535 or taken.
            let bus = free_port()?;
            let extra = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--cluster-port",
                &bus.to_string(),
            ]
            .map(String::from);
            let mut extra = extra.to_vec();
            if let Some(certs) = tls {
                let port = free_port()?;
                extra.extend(certs.server_args(port, false));
                extra.extend(["--tls-cluster".into(), "yes".into()]);
                tls_ports.push(port);
            }
            nodes.push(PrivateRedis::start_with(&extra)?);
        }
        let cluster = PrivateCluster { nodes, tls_ports };
        // Over TLS the nodes announce their TLS ports: the cluster is made
        // through those.
        let ports: Vec<u16> = match tls {
            Some(_) => cluster.tls_ports.clone(),
            None => cluster.nodes.iter().map(|n| n.port).collect(),
        };
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut create = Command::new("redis-cli");
        if let Some(certs) = tls {
            create.arg("--tls").arg("--cacert").arg(&certs.ca);
        }
        let out = create
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .map_err(|e| format!("cannot run redis-cli (Debian package redis-tools): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .last()
                    .unwrap_or_default()
            ));
        }
        cluster.wait_ok(Duration::from_secs(20))?;
        Ok(cluster)
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("{CLUSTER_SCHEME}{}", seeds.join(","))
    }

    /// `rediss+cluster://` with every node's TLS port as a seed (a cluster
    /// started with [`Self::start_tls`]), the CA named as edc-sync reads it.
    pub fn tls_url(&self, ca: &std::path::Path) -> String {
        let seeds: Vec<String> = self.tls_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!(
            "rediss+cluster://{}?ssl_ca_certs={}",
            seeds.join(","),
            ca.display()
        )
    }

    /// The nodes' ports, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// Waits until every node reports `cluster_state:ok` and knows all
    /// three masters.
    fn wait_ok(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.nodes.iter().all(|n| {
                Command::new("redis-cli")
                    .args(["-p", &n.port.to_string(), "cluster", "info"])
                    .output()
                    .map(|o| {
                        let info = String::from_utf8_lossy(&o.stdout);
                        info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
                    })
                    .unwrap_or(false)
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the cluster was not ok within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
