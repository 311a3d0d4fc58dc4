//! A page received with nothing but the syscalls it takes: one request
//! written to a kept-alive loopback connection, the response read into a
//! reused buffer until its `Content-Length` is in. No HTTP library, no
//! runtime, no TLS: what `bench sync`'s floor adds when it counts the
//! receive, so that a page's system time is compared with system time of
//! the same kind (a page does not reach the disk without crossing a
//! socket first).

use std::io::{Read, Write};
use std::net::TcpStream;

use anyhow::{bail, Context};

/// A connection that asks for the same page again and again.
pub struct BareGet {
    stream: TcpStream,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl BareGet {
    /// Connects to the `http://host:port` of `base` to GET `path_and_query`
    /// with `token` as a bearer token.
    pub fn connect(base: &str, path_and_query: &str, token: &str) -> anyhow::Result<BareGet> {
        let authority = base
            .strip_prefix("http://")
            .with_context(|| format!("the floor's receive needs an http:// address, not {base}"))?
            .trim_end_matches('/');
        let stream = TcpStream::connect(authority).with_context(|| format!("connecting to {authority}"))?;
        stream.set_nodelay(true)?;
        let request = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .into_bytes();
        Ok(BareGet {
            stream,
            request,
            buf: Vec::with_capacity(128 * 1024),
        })
    }

    /// Sends the request and reads the whole response; returns its body.
    pub fn page(&mut self) -> anyhow::Result<&[u8]> {
        self.stream.write_all(&self.request)?;
        let mut filled: usize = 0;
        let (head_end, body_len) = loop {
            let searched = filled.saturating_sub(3);
            filled = self.read_more(filled, "before the response's head")?;
            if let Some(end) = self.buf[searched..filled]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                let end = searched + end;
                break (end + 4, content_length(&self.buf[..end])?);
            }
        };
        while filled < head_end + body_len {
            filled = self.read_more(filled, "inside the body")?;
        }
        Ok(&self.buf[head_end..head_end + body_len])
    }

    /// Reads what the socket has straight after the `filled` bytes of the
    /// buffer (no copy between); returns the new length.
    fn read_more(&mut self, filled: usize, when: &str) -> anyhow::Result<usize> {
        const READ: usize = 64 * 1024;
        if self.buf.len() < filled + READ {
            self.buf.resize(filled + READ, 0);
        }
        let n = self.stream.read(&mut self.buf[filled..])?;
        if n == 0 {
            bail!("the simulator closed the connection {when}");
        }
        Ok(filled + n)
    }
}

/// The `Content-Length` of a response head; a status other than 200, or a
/// head without the length (a chunked body), is refused.
fn content_length(head: &[u8]) -> anyhow::Result<usize> {
    let head = std::str::from_utf8(head).context("a response head that is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if status.split(' ').nth(1) != Some("200") {
        bail!("the floor's GET was answered {status:?}");
    }
    lines
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .with_context(|| format!("the floor's GET was answered without a Content-Length: {head:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_head_gives_its_length_and_other_heads_are_refused() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 42";
        assert_eq!(content_length(head).unwrap(), 42);
        assert!(content_length(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0").is_err());
        assert!(content_length(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked").is_err());
    }
}
