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
}

impl PrivateCluster {
    /// Starts three masters and creates the cluster (16384 slots split
    /// three ways); the error says why not.
    pub fn start() -> Result<PrivateCluster, String> {
        let mut nodes = Vec::new();
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
            nodes.push(PrivateRedis::start_with(&extra)?);
        }
        let cluster = PrivateCluster { nodes };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
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
