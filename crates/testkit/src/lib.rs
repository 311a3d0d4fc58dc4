//! Real parts for edc-sync's tests and on-site OQ: a private Redis (plain
//! or a three-master cluster), private S3 object stores and an Azure
//! Storage emulator on loopback, and readers of a landing that
//! share no code with the product, so a test that checks what landed is an
//! independent witness.

pub mod azurite;
pub mod envelope;
pub mod fault_proxy;
pub mod landed;
pub mod postgres_server;
pub mod redis_cluster;
pub mod redis_server;
pub mod s3_server;
pub mod tls;
