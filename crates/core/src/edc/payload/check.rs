//! A page checked while it streams in: every chunk the
//! client reads goes to SHA-256, to the temp file and here, once, so the
//! temp file is never read back.
//!
//! JSON is checked in place by the push lexer. ODM goes to quick-xml, a
//! pull parser, on a thread of its own fed the same chunks through a
//! bounded channel: the body is still read once, memory stays bounded
//! (a few chunks in flight), and the XML work overlaps the download.

use std::io::{BufRead, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use super::json::JsonCheck;
use super::odm::{self, OdmSummary};
use super::{CursorValue, Envelope, InvalidPayload, PageSummary};
use crate::config::{Delta, Paging, PayloadFormat};

/// Chunks queued for the ODM thread before the sender waits for it.
const ODM_QUEUE: usize = 16;

/// A page of one delta's format, being validated as it arrives.
pub(crate) struct PageCheck {
    format: Format,
}

enum Format {
    Json(Box<JsonCheck>),
    /// ODM, and whether it is a study dataset (cursor: its creation time).
    Odm(OdmCheck, bool),
}

impl PageCheck {
    /// With `identify`, a JSON page's check learns every record's
    /// identity too (`identity.rs`; a delta with a lookback). Fails only
    /// when the ODM validator's thread cannot be started (an OS resource
    /// error, not a fault of the page).
    pub(crate) fn new(delta: &Delta, identify: bool) -> std::io::Result<PageCheck> {
        let format = match delta.format {
            PayloadFormat::Json => {
                let next = match &delta.paging {
                    Paging::JsonNext { next_pointer } => Some(next_pointer.as_str()),
                    _ => None,
                };
                let records = delta.records_pointer.as_deref().unwrap_or("/data");
                let field = delta.cursor_field.as_deref().unwrap_or_default();
                let check = JsonCheck::of_kind(records, next, field, delta.cursor_kind);
                let check = match &delta.collection {
                    Some(c) => check.counting(&c.page_count_pointer, &c.total_items_pointer),
                    None => check,
                };
                let check = match delta.window.as_ref().map(|w| &w.format) {
                    Some(crate::config::WindowFormat::Date { zone }) => check.in_days_of(zone),
                    _ => check,
                };
                let check = match &delta.paging {
                    Paging::RedcapRecords { .. } => check.without_cursor(),
                    _ => check,
                };
                let check = match &delta.server_zone {
                    Some(zone) => check.in_zone(zone),
                    None => check,
                };
                let record_id = delta.lookback.as_ref().and_then(|l| l.record_id.as_deref());
                Format::Json(Box::new(if identify {
                    check.identifying(record_id)
                } else {
                    check
                }))
            }
            PayloadFormat::Odm => Format::Odm(OdmCheck::start()?, delta.paging == Paging::RaveDataset),
        };
        Ok(PageCheck { format })
    }

    /// Records that carry no time are remembered at `at` (REDCap's records:
    /// the end of the window they were read in).
    pub(crate) fn stamp_all(&mut self, at: &str) {
        if let Format::Json(json) = &mut self.format {
            json.stamp_all(at);
        }
    }

    /// The next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        match &mut self.format {
            Format::Json(json) => json.feed(chunk),
            Format::Odm(odm, _) => odm.feed(chunk),
        }
    }

    /// The whole body was fed: what the page holds, or why it is not a page.
    pub(crate) fn finish(self) -> Result<PageSummary, InvalidPayload> {
        match self.format {
            Format::Json(json) => json.finish(),
            Format::Odm(odm, false) => odm.finish().map(odm_summary),
            Format::Odm(odm, true) => odm.finish().and_then(dataset_summary),
        }
    }
}

/// A study dataset's page: its mark is the time the server made it, which
/// must be an RFC 3339 instant (an error document is judged by the dialect
/// first, so it needs none).
fn dataset_summary(odm: OdmSummary) -> Result<PageSummary, InvalidPayload> {
    let creation = odm.creation.clone();
    let mut page = odm_summary(odm);
    if page.envelope.rave_response.is_some() || page.envelope.rave_error_description.is_some() {
        return Ok(page);
    }
    let creation = creation.ok_or_else(|| {
        InvalidPayload::odm(
            "a study dataset's ODM root has no CreationDateTime (the next start is taken from it)",
        )
    })?;
    if crate::record::order::instant(&creation).is_none() {
        return Err(InvalidPayload::odm(format!(
            "the ODM root's CreationDateTime {creation:?} is not an RFC 3339 instant"
        )));
    }
    page.high_water = Some(CursorValue::Text(creation));
    page.low_water = None;
    Ok(page)
}

fn odm_summary(odm: OdmSummary) -> PageSummary {
    PageSummary {
        records: if odm.audit_records > 0 {
            odm.audit_records
        } else {
            odm.subject_data
        },
        records_found: true,
        next_link: None,
        page_count: None,
        total_items: None,
        other_day: None,
        high_water: odm.max_source_id.map(|id| CursorValue::Number(id.into())),
        low_water: odm.min_source_id.map(|id| CursorValue::Number(id.into())),
        envelope: Envelope {
            rave_response: odm.rave_response,
            rave_error_description: odm.error_description,
            ..Envelope::default()
        },
        keys: None,
    }
}

/// Validates a whole page held in memory.
pub fn validate(delta: &Delta, body: &[u8]) -> Result<PageSummary, InvalidPayload> {
    let mut check = PageCheck::new(delta, false)
        .map_err(|e| InvalidPayload::odm(format!("the ODM validator could not be started: {e}")))?;
    check.feed(body);
    check.finish()
}

/// The ODM validator on its thread.
struct OdmCheck {
    chunks: Option<SyncSender<Vec<u8>>>,
    /// `None` only once joined.
    thread: Option<JoinHandle<Result<OdmSummary, InvalidPayload>>>,
}

impl OdmCheck {
    fn start() -> std::io::Result<OdmCheck> {
        let (chunks, receiver) = sync_channel(ODM_QUEUE);
        let thread = std::thread::Builder::new()
            .name("odm-check".into())
            .spawn(move || odm::scan(Chunks::new(receiver)))?;
        Ok(OdmCheck {
            chunks: Some(chunks),
            thread: Some(thread),
        })
    }

    fn feed(&mut self, chunk: &[u8]) {
        // A send fails only once the parser has stopped (on an error it
        // reports at `finish`): the rest of the body is not needed.
        if let Some(chunks) = &self.chunks {
            if chunks.send(chunk.to_vec()).is_err() {
                self.chunks = None;
            }
        }
    }

    fn finish(mut self) -> Result<OdmSummary, InvalidPayload> {
        self.chunks = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            // A panic in the parser: the page is not known to be valid, so
            // it is not landed (and is kept in quarantine for a look).
            Some(Err(_)) => Err(InvalidPayload::odm("the ODM validator stopped unexpectedly")),
            None => Err(InvalidPayload::odm("the ODM validator was already finished")),
        }
    }
}

impl Drop for OdmCheck {
    /// A page abandoned mid-body (a transport error): the parser sees the
    /// end of its input, stops, and its thread is joined, never leaked.
    fn drop(&mut self) {
        self.chunks = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The chunks as a reader: each is handed to the parser's buffer as is.
struct Chunks {
    receiver: Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl Chunks {
    fn new(receiver: Receiver<Vec<u8>>) -> Chunks {
        Chunks {
            receiver,
            current: Vec::new(),
            at: 0,
        }
    }
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Chunks {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.at == self.current.len() {
            match self.receiver.recv() {
                Ok(next) => {
                    self.current = next;
                    self.at = 0;
                }
                // The sender is gone: the body ended.
                Err(_) => return Ok(&[]),
            }
        }
        Ok(&self.current[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.current.len());
    }
}

/// A sink that also feeds what it is given to a [`PageCheck`]: the
/// one pass over the body.
pub(crate) struct Checked<'a, W> {
    sink: &'a mut W,
    check: &'a mut PageCheck,
}

impl<'a, W: std::io::Write> Checked<'a, W> {
    pub(crate) fn new(sink: &'a mut W, check: &'a mut PageCheck) -> Self {
        Checked { sink, check }
    }
}

impl<W: std::io::Write> std::io::Write for Checked<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.sink.write(buf)?;
        self.check.feed(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.sink.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(vendor: &str) -> Delta {
        let config = crate::config::parse(
            std::path::Path::new("policies.yaml"),
            include_str!("../../../../../config/fixtures/simulator-policies.yaml"),
        )
        .unwrap();
        config.vendor(vendor).unwrap().delta.clone().unwrap()
    }

    const ODM: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ODM xmlns="http://www.cdisc.org/ns/odm/v1.3" xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" ODMVersion="1.3" FileType="Transactional" FileOID="f" CreationDateTime="2026-01-01T00:00:00">
<ClinicalData StudyOID="S" MetaDataVersionOID="1"><SubjectData SubjectKey="1"><AuditRecord><SourceID>7</SourceID></AuditRecord></SubjectData></ClinicalData></ODM>"#;

    #[test]
    fn an_odm_page_fed_in_chunks_is_summarised_as_a_whole_one() {
        let mut check = PageCheck::new(&delta("rave"), false).unwrap();
        for chunk in ODM.as_bytes().chunks(7) {
            check.feed(chunk);
        }
        let page = check.finish().unwrap();
        assert_eq!(page.high_water, Some(CursorValue::Number(7.into())));
        assert_eq!(validate(&delta("rave"), ODM.as_bytes()).unwrap(), page);
    }

    /// The parser stops at the first error; the rest of a large body is
    /// still fed (it is being hashed and written), without blocking on a
    /// thread that no longer reads.
    #[test]
    fn an_odm_parser_that_stopped_early_does_not_block_the_rest_of_the_body() {
        let mut check = PageCheck::new(&delta("rave"), false).unwrap();
        check.feed(b"<ODM><unclosed></ODM>");
        for _ in 0..(ODM_QUEUE * 8) {
            check.feed(&[b' '; 64 * 1024]);
        }
        let err = check.finish().unwrap_err();
        assert_eq!(err.format, "ODM", "{err}");
    }

    /// A body that breaks off (a transport error) drops its check half
    /// way: the parser thread sees the end of its input and is joined.
    #[test]
    fn an_abandoned_odm_check_ends_its_thread() {
        let mut check = PageCheck::new(&delta("rave"), false).unwrap();
        check.feed(&ODM.as_bytes()[..100]);
        drop(check);
    }

    #[test]
    fn a_json_page_is_checked_by_the_lexer() {
        let body = br#"{"responseDetails":{"next_page":"/n?o=2"},"data":[{"modified_date__v":"2026-01-01T00:00:00Z"}]}"#;
        let mut check = PageCheck::new(&delta("vault_json"), false).unwrap();
        let mut sink = Vec::new();
        let mut checked = Checked::new(&mut sink, &mut check);
        std::io::Write::write_all(&mut checked, body).unwrap();
        assert_eq!(sink, body, "the sink gets every byte");
        let page = check.finish().unwrap();
        assert_eq!((page.records, page.next_link.as_deref()), (1, Some("/n?o=2")));
    }
}
