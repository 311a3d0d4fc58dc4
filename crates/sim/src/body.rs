//! A response body streamed from a chunk iterator, optionally cut short.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::dataset::Page;

/// How long a cut body stalls before failing: long enough for the server to
/// flush the headers and the partial body, so the client really receives a
/// short body rather than no response at all.
const CUT_STALL: std::time::Duration = std::time::Duration::from_millis(50);

/// Streams a [`Page`]. With `cut_after`, the body stops after that many
/// bytes with an error, so the connection closes short of Content-Length:
/// a truncated body, as a failing proxy or server produces.
pub struct SimBody {
    len: u64,
    chunks: Box<dyn Iterator<Item = Bytes> + Send>,
    cut_after: Option<u64>,
    sent: u64,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// With `cut_after`: pause this long there, then send the rest (a
    /// stalling server) instead of failing.
    pause_at_cut: Option<std::time::Duration>,
}

impl SimBody {
    pub fn new(page: Page, cut_after: Option<u64>) -> SimBody {
        SimBody {
            len: page.len,
            chunks: page.chunks,
            cut_after,
            sent: 0,
            stall: None,
            pause_at_cut: None,
        }
    }

    /// A body that stalls for `pause` halfway through, then completes.
    pub fn stalling(page: Page, pause: std::time::Duration) -> SimBody {
        let half = page.len / 2;
        let mut body = SimBody::new(page, Some(half));
        body.pause_at_cut = Some(pause);
        body
    }

    pub fn empty() -> SimBody {
        SimBody::new(Page::whole(Bytes::new()), None)
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(cut) = self.cut_after {
            if self.sent >= cut {
                let pause = self.pause_at_cut.unwrap_or(CUT_STALL);
                let stall = self
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
                if stall.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if self.pause_at_cut.is_none() {
                    return Poll::Ready(Some(Err(std::io::Error::other(
                        "body cut short by a truncate fault",
                    ))));
                }
                // A stall, not a cut: carry on with the rest.
                self.cut_after = None;
            }
        }
        match self.chunks.next() {
            Some(mut chunk) => {
                if let Some(cut) = self.cut_after {
                    let room = (cut - self.sent) as usize;
                    if chunk.len() > room {
                        // Keep the rest for after a stall; a cut drops it.
                        let rest = chunk.split_off(room);
                        if self.pause_at_cut.is_some() {
                            let chunks = std::mem::replace(&mut self.chunks, Box::new(std::iter::empty()));
                            self.chunks = Box::new(std::iter::once(rest).chain(chunks));
                        }
                    }
                }
                self.sent += chunk.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}
