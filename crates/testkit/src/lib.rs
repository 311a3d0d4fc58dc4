//! Real parts for edc-sync's tests and on-site OQ: a private Redis (plain,
//! TLS, or a three-master cluster), a throwaway PostgreSQL, private S3
//! object stores and an Azure Storage emulator on loopback, TLS
//! certificates made for them, and a fault proxy in front of them.
//!
//! Launchers only: nothing here judges the product. The independent
//! witnesses that do (a landing's reader, the rate envelope) belong to the
//! qualification (`edc-qualify`), which judges the tool with them on site.

pub mod azurite;
pub mod fault_proxy;
pub mod postgres_server;
mod postgres_session;
pub mod pushgateway;
pub mod redis_cluster;
pub mod redis_server;
pub mod s3_server;
pub mod tls;
