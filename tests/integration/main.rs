//! The integration tests, as one binary: the crate and its dependencies are
//! linked once for the whole suite instead of once per file. Each module is
//! one theme; `support` starts the real binary, git repositories and
//! redis-server for them.

mod support;

mod audit_integrity;
mod audit_trail;
mod castor;
mod castor_collection;
mod claims;
mod cli_conventions;
mod config_provenance;
mod config_validation;
mod demo;
mod docs_commands;
mod docs_examples;
mod durability;
mod edc_client;
mod exit_codes;
mod hostile;
mod house;
mod insider;
mod landed_integrity;
mod ledger;
mod moved_evidence;
mod object_landing;
mod object_lock;
mod operations;
mod oq;
mod pacer;
mod properties;
mod redcap;
mod secrets;
mod state_db;
mod sync;
mod tampering;
mod traceability;
mod vendors;
