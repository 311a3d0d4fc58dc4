//! SHA-256 as lowercase hex, the one digest format used everywhere
//! (audit chain, landing files, provenance).

use sha2::{Digest, Sha256};

/// 64 zeros: the `prev_sha256` of the first line of an audit file.
pub const ZERO_SHA256: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of a file's bytes, streamed.
pub(crate) fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    sha256_file_through(path, &mut vec![0u8; 256 * 1024])
}

/// [`sha256_file`] read through `buf`: a caller hashing many files keeps
/// one buffer (a fresh 256 KiB one per file is a map and an unmap each).
pub(crate) fn sha256_file_through(path: &std::path::Path, buf: &mut [u8]) -> std::io::Result<String> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let mut file = crate::no_follow::read(path)?;
    loop {
        let n = file.read(buf)?;
        if n == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_test_vector() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(super::ZERO_SHA256.len(), 64);
    }
}
