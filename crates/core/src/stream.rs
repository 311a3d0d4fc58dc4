//! The identity of a stream: the one cursor a run works on.

use serde::{Deserialize, Serialize};

use crate::config::{Placeholder, PlaceholderValues};

/// vendor + tenant + study + protocol version + stream name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamIdentity {
    pub vendor: String,
    pub tenant: Option<String>,
    pub study: Option<String>,
    pub protocol_version: Option<String>,
    pub stream: Option<String>,
}

impl PlaceholderValues for StreamIdentity {
    fn value(&self, p: Placeholder) -> Option<&str> {
        match p {
            Placeholder::Vendor => Some(&self.vendor),
            Placeholder::Tenant => self.tenant.as_deref(),
            Placeholder::Study => self.study.as_deref(),
            Placeholder::ProtocolVersion => self.protocol_version.as_deref(),
            Placeholder::Stream => self.stream.as_deref(),
        }
    }
}
