//! The hash-chained, append-only audit trail (invariant 3: audit first,
//! then act). `docs/audit-trail.md` is the normative description.

pub(crate) mod anchor;
pub(crate) mod anchors;
mod check_stamp;
pub(crate) mod checkpoint;
pub(crate) mod commit;
mod header;
pub(crate) mod heads;
pub(crate) mod line;
mod log;
pub(crate) mod read;
mod run_id;
pub(crate) mod spill;

pub(crate) mod tail;
pub(crate) mod verify;

pub use crate::stream::StreamIdentity;
pub use crate::trace_context::TraceContext;
pub use anchor::redis_copy::load_script as load_anchor_script;
pub use anchor::{first_line_sha256, ChainHead, DIR as ANCHOR_DIR};
pub use anchors::Anchors;
pub use check_stamp::{check_stamps, StampNotHeld, StampReport, StampUnreadable};
pub use checkpoint::{AuditKey, KeyError, KEY_ENV, LINE_MAC};
pub use header::RunStarted;
pub use line::compose;
pub use log::{now_rfc3339, AuditEvent, AuditLog};
pub use read::each_event;
pub use run_id::RunId;
pub use verify::{verify, verify_with, Checks, Damage, Finding, NotIntact, ReadError, Report};

pub use anchor::redis_copy::RedisAnchorError;
pub(crate) use anchors::PathsReinterpreted;
pub(crate) use commit::{CommitFields, CommitLine, CommitReceipt, CommitRecord};
pub(crate) use log::{Appended, TailRepaired};
pub use log::{AuditError, EncodeError};
