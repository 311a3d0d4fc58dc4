//! The pacer's integration tests, one binary (each test binary costs a
//! link on every change): the in-process queue of a quota's cap, and a
//! wait past the horizon named by what waited.

mod queue;
mod wait_too_long;
