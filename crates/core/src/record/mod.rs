//! What a record is to the state, on every backend: its cursor value and
//! the one order cursor values have (`order.rs`), where a completed
//! window's next one starts (`restart.rs`), and its identity
//! (`identity.rs`). Neutral ground: the page checks make them from a page
//! (`crate::edc::payload`), the cursor and its lookback memory keep them
//! (`crate::store`), and neither side imports the other for them.

pub(crate) mod identity;
pub mod order;
mod restart;

pub use order::CursorValue;
pub(crate) use restart::Restart;
