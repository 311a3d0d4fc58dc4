//! The EDC side: the read-only client, Retry-After, Link headers, paging
//! and payload validation (invariant 1: read-only by construction).

mod client;
pub mod link;
mod origin;
pub mod paging;
pub mod payload;
pub mod retry_after;
mod secret;

pub use client::{BodyDigest, FetchError, ReadOnlyClient, Reply, QUOTA_HEADERS};
pub use origin::{Origin, OriginError};
pub use secret::Secret;
