//! Small durability primitives shared by the audit trail and the stores.

use std::fs::File;
use std::io;
use std::path::Path;

/// fsyncs the directory holding `path`, so a file created or renamed there
/// survives a crash (POSIX makes the directory entry durable only then).
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
