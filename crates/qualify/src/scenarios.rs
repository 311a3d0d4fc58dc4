//! The OQ scenarios, one theme a file: run by `cargo test`
//! (tests/integration/oq.rs) and by `edc-sync qualify oq` on the installed
//! binary.

pub use super::scenario::Scenario;

/// Every scenario, in id order.
pub fn all() -> Vec<Scenario> {
    let mut all = Vec::new();
    all.extend(super::throttling::all());
    all.extend(super::pacing::all());
    all.extend(super::boundaries::all());
    all.extend(super::change_control::all());
    all.extend(super::audit_chain::all());
    all.extend(super::resilience::all());
    all.extend(super::vendors::all());
    all.extend(super::deltas::all());
    all.extend(super::integrity::all());
    all.extend(super::state_db::all());
    all.extend(super::late_records::all());
    all.extend(super::retention::all());
    all.extend(super::castor::all());
    all.extend(super::redcap::all());
    all.sort_by_key(|s| s.id);
    all
}
