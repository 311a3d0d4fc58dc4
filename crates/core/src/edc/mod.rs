//! The EDC side: the read-only client and its credentials, vendor error
//! dialects, Retry-After, Link headers, paging and payload validation
//! (invariant 1: read-only by construction).

mod auth;
mod client;
mod fetch_error;
pub(crate) mod link;
mod oauth;
mod origin;
pub mod payload;
mod reply;
mod secret;
pub(crate) mod vendor;
pub(crate) mod vendor_error;

pub use auth::Credentials;
pub use client::ReadOnlyClient;
pub use fetch_error::FetchError;
pub use link::next_target;
pub use origin::OriginError;
pub use vendor::{first_page, next_page, next_window_start, tokens, PagingError, Token, VqlSelect};

pub use auth::AuthError;
pub(crate) use client::ERROR_BODY_CAP;
pub(crate) use reply::{BodyDigest, Reply, ResponseMeta};
