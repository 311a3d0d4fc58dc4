//! A loopback HTTP proxy in front of a real server that injects one fault
//! into the Nth request matching a path: an answer of its own (503
//! SlowDown, 429, 500), a body changed by one byte on the way (so the
//! server sees other bytes than the checksum sent names), or a connection
//! closed half-way through the body (an interrupted upload). Everything
//! else passes through byte for byte, one request a connection
//! (`Connection: close` upstream), which every HTTP client copes with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to the chosen request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `503 Slow Down` with S3's `SlowDown` error and `Retry-After: 1`.
    SlowDown,
    /// `429 Too Many Requests`.
    TooManyRequests,
    /// `500 Internal Server Error`.
    ServerError,
    /// The last byte of the body flipped before it reaches the server.
    CorruptBody,
    /// Half the body sent, then both connections closed.
    CloseMidBody,
}

pub struct FaultProxy {
    pub port: u16,
    /// Requests whose path held the needle so far.
    pub matched: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Proxies to `127.0.0.1:upstream`; `fault` hits the `nth` (1-based)
    /// request of `method` whose path contains `needle`.
    pub async fn start(
        upstream: u16,
        method: &'static str,
        needle: &'static str,
        nth: u64,
        fault: Fault,
    ) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fault proxy");
        let port = listener.local_addr().expect("its address").port();
        let matched = Arc::new(AtomicU64::new(0));
        let seen = matched.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = serve(client, upstream, method, needle, nth, fault, seen).await;
                });
            }
        });
        FaultProxy { port, matched, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut client: TcpStream,
    upstream: u16,
    method: &str,
    needle: &str,
    nth: u64,
    fault: Fault,
    seen: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let (head, mut body) = read_request(&mut client).await?;
    let text = String::from_utf8_lossy(&head).into_owned();
    let request_line = text.lines().next().unwrap_or_default().to_string();
    let hit = request_line.starts_with(method)
        && request_line.contains(needle)
        && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth;
    let answer = |status: &str, code: &str| {
        let xml = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the test proxy</Message></Error>");
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nRetry-After: 1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
            xml.len()
        )
    };
    if hit {
        match fault {
            Fault::SlowDown => {
                return client
                    .write_all(answer("503 Slow Down", "SlowDown").as_bytes())
                    .await
            }
            Fault::TooManyRequests => {
                return client
                    .write_all(answer("429 Too Many Requests", "TooManyRequests").as_bytes())
                    .await
            }
            Fault::ServerError => {
                return client
                    .write_all(answer("500 Internal Server Error", "InternalError").as_bytes())
                    .await
            }
            Fault::CorruptBody => {
                if let Some(last) = body.last_mut() {
                    *last ^= 0x01;
                }
            }
            Fault::CloseMidBody => {
                let mut server = TcpStream::connect(("127.0.0.1", upstream)).await?;
                server.write_all(&close_after(&head)).await?;
                server.write_all(&body[..body.len() / 2]).await?;
                return Ok(());
            }
        }
    }
    let mut server = TcpStream::connect(("127.0.0.1", upstream)).await?;
    server.write_all(&close_after(&head)).await?;
    server.write_all(&body).await?;
    let mut response = Vec::new();
    server.read_to_end(&mut response).await?;
    client.write_all(&response).await?;
    client.shutdown().await
}

/// The request head with `Connection: close`, so that the server's answer
/// ends with its connection.
fn close_after(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// One request: its head (through the blank line) and its body, as framed
/// by `Content-Length` or chunks (kept as sent).
async fn read_request(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = buf[..end].to_vec();
    let mut body = buf[end..].to_vec();
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = text
        .lines()
        .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
    loop {
        let done = match (length, chunked) {
            (Some(len), _) => body.len() >= len,
            (None, true) => body.ends_with(b"0\r\n\r\n"),
            (None, false) => true,
        };
        if done {
            return Ok((head, body));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok((head, body));
        }
        body.extend_from_slice(&chunk[..n]);
    }
}
