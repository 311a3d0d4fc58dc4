//! The generic profile: the simulator as it always was, a bearer token
//! and bare HTTP statuses.

/// `Authorization: Bearer {token}`.
pub(super) fn authenticate(value: &[u8], config: &crate::SimConfig) -> super::Authn {
    if value == format!("Bearer {}", config.token).as_bytes() {
        super::Authn::Ok
    } else {
        super::Authn::Invalid
    }
}
