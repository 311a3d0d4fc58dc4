//! The hash-chained, append-only audit trail (invariant 3: audit first,
//! then act). `docs/audit-trail.md` is the normative description.

pub mod anchor;
pub mod anchors;
pub mod checkpoint;
pub mod commit;
mod header;
pub mod line;
mod log;
pub mod read;
mod run_id;
mod shared;
pub mod tail;
pub mod verify;

pub use crate::stream::StreamIdentity;
pub use anchor::ChainHead;
pub use anchors::{Anchors, PathsReinterpreted};
pub use checkpoint::{AuditKey, Checkpoint};
pub use commit::{CommitLine, CommitReceipt, CommitRecord};
pub use header::RunStarted;
pub use log::{
    now_rfc3339, Appended, AuditError, AuditEvent, AuditLog, AuditRepaired, EncodeError, TailRepaired,
};
pub use run_id::RunId;
pub use shared::SharedAudit;
pub use verify::{verify, Damage, NotIntact, Report};
