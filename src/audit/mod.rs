//! The hash-chained, append-only audit trail (invariant 3: audit first,
//! then act). `docs/audit-trail.md` is the normative description.

mod header;
pub mod line;
mod log;
mod run_id;
mod shared;
pub mod verify;

pub use crate::stream::StreamIdentity;
pub use header::RunStarted;
pub use log::{now_rfc3339, Appended, AuditError, AuditEvent, AuditLog, TailRepaired};
pub use run_id::RunId;
pub use shared::SharedAudit;
pub use verify::{verify, Damage, NotIntact, Report};
