//! Facts about the machine and the account a run executes under, for the
//! audit header ("who ran what, where").

/// The host name, or `unknown-host` if the OS will not say.
pub fn name() -> String {
    gethostname::gethostname()
        .into_string()
        .unwrap_or_else(|_| "unknown-host".into())
}

/// The OS user: `$USER`, else `$LOGNAME`, else the numeric uid.
pub fn user() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(u) = std::env::var(var) {
            if !u.is_empty() {
                return u;
            }
        }
    }
    match std::fs::metadata("/proc/self") {
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            format!("uid:{}", m.uid())
        }
        Err(_) => "unknown-user".into(),
    }
}

/// `OS/arch`, e.g. `linux/x86_64`.
pub fn platform() -> String {
    format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)
}
