//! Every file under a directory, for the evidence package, its checksums
//! and the benchmarks' read-back of what a run wrote.

use std::path::{Path, PathBuf};

/// Every file under `dir`, however deep, sorted by path (a package's
/// checksums list them in a stable order). A directory that cannot be
/// read contributes nothing.
pub fn under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = edc_core::no_follow::read_dir(&d) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
