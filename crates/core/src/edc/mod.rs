//! The EDC side: the read-only client and its credentials, vendor error
//! dialects, Retry-After, Link headers, paging and payload validation
//! (invariant 1: read-only by construction).

mod auth;
mod client;
pub mod dialect;
mod fetch_error;
pub mod link;
mod login;
mod origin;
pub mod paging;
pub mod payload;
mod reply;
mod secret;
pub mod vql;

pub use auth::{AuthError, Credentials, Obtained};
pub use client::{ReadOnlyClient, ERROR_BODY_CAP, EXECUTION_ID_HEADER, QUOTA_HEADERS};
pub use fetch_error::FetchError;
pub use origin::{Origin, OriginError};
pub use reply::{BodyDigest, Reply, ResponseMeta};
pub use secret::Secret;
