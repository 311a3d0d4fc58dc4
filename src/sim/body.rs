//! A response body streamed from a chunk iterator, optionally cut short.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::dataset::Page;

/// Streams a [`Page`]. With `cut_after`, the body stops after that many
/// bytes with an error, so the connection closes short of Content-Length:
/// a truncated body, as a failing proxy or server produces.
pub struct SimBody {
    len: u64,
    chunks: Box<dyn Iterator<Item = Bytes> + Send>,
    cut_after: Option<u64>,
    sent: u64,
}

impl SimBody {
    pub fn new(page: Page, cut_after: Option<u64>) -> SimBody {
        SimBody {
            len: page.len,
            chunks: page.chunks,
            cut_after,
            sent: 0,
        }
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
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(cut) = self.cut_after {
            if self.sent >= cut {
                return Poll::Ready(Some(Err(std::io::Error::other(
                    "body cut short by a truncate fault",
                ))));
            }
        }
        match self.chunks.next() {
            Some(mut chunk) => {
                if let Some(cut) = self.cut_after {
                    let room = (cut - self.sent) as usize;
                    chunk.truncate(room);
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
