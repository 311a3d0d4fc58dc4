//! A real `redis-server` on a free loopback port, for one test; stopped
//! when dropped. A test that needs Redis and finds no `redis-server` fails
//! with the install command; it never skips.

pub use edc_testkit::redis_server::PrivateRedis as RedisServer;

/// Starts a server or fails the test with how to install one.
pub fn start() -> RedisServer {
    RedisServer::start().unwrap_or_else(|why| {
        panic!(
            "{why}; the Redis-backed tests need a real server.\n\
             Install it with: sudo apt-get install -y redis-server (scripts/test does this when run as root)"
        )
    })
}

pub use edc_testkit::redis_cluster::PrivateCluster as RedisCluster;

/// Starts a three-master cluster or fails the test with how to install one.
pub fn start_cluster() -> RedisCluster {
    RedisCluster::start().unwrap_or_else(|why| {
        panic!(
            "{why}; the Redis Cluster tests need redis-server and redis-cli.\n\
             Install them with: sudo apt-get install -y redis-server (scripts/test does this when run as root)"
        )
    })
}

/// A server that also speaks TLS, with certificates the test makes; its
/// TLS port. Fails the test with how to install what is missing.
pub fn start_tls(certs: &edc_testkit::tls::TestCerts, require_client_cert: bool) -> (RedisServer, u16) {
    RedisServer::start_tls(certs, require_client_cert).unwrap_or_else(|why| {
        panic!(
            "{why}; the Redis TLS tests need redis-server built with TLS (the Debian package is).\n\
             Install it with: sudo apt-get install -y redis-server (scripts/test does this when run as root)"
        )
    })
}

/// Certificates for a TLS server and a client, made in `dir`.
pub fn certs(dir: &std::path::Path) -> edc_testkit::tls::TestCerts {
    edc_testkit::tls::make(dir).unwrap_or_else(|why| panic!("{why}"))
}

/// A three-master cluster that also speaks TLS (the bus too).
pub fn start_tls_cluster(certs: &edc_testkit::tls::TestCerts) -> RedisCluster {
    RedisCluster::start_tls(certs).unwrap_or_else(|why| {
        panic!(
            "{why}; the Redis Cluster TLS tests need redis-server built with TLS and redis-cli.\n\
             Install them with: sudo apt-get install -y redis-server redis-tools"
        )
    })
}
