//! Streaming CDISC ODM 1.3 validation with quick-xml: well-formed, an `ODM`
//! root of version 1.3.x, no DTD (so no entity-expansion bombs), records
//! counted, and the largest Rave `AuditRecord` `SourceID` found.
//!
//! Rave's `DateTimeStamp` carries no time zone. This code never reads it:
//! the page is landed byte for byte, and nothing reinterprets it.

use std::io::{BufRead, BufReader, Read};

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::PrefixDeclaration;
use quick_xml::Reader;

use super::xml_text::{self, XmlText};
use super::{InvalidPayload, RaveResponse};

const ODM_NS: &[u8] = b"http://www.cdisc.org/ns/odm/v1.3";

/// What an ODM page holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OdmSummary {
    pub odm_version: String,
    pub file_type: String,
    pub clinical_data: u64,
    pub subject_data: u64,
    pub audit_records: u64,
    pub max_source_id: Option<u64>,
    pub min_source_id: Option<u64>,
    /// The root was Rave's `<Response>` (an error or acknowledgement, never data).
    pub rave_response: Option<RaveResponse>,
    /// `mdsol:ErrorDescription` on the ODM root: Rave reporting an error.
    pub error_description: Option<String>,
    /// The root's `CreationDateTime`: when the server made the document.
    pub creation: Option<String>,
}

/// Validates an ODM document and counts its records. The bytes may be
/// UTF-8, UTF-16 or ISO-8859-1 with a matching declaration (`xml_text`).
pub fn scan(reader: impl Read) -> Result<OdmSummary, InvalidPayload> {
    let text = XmlText::new(reader).map_err(|e| InvalidPayload::odm(format!("not well-formed XML: {e}")))?;
    scan_buffered(BufReader::with_capacity(64 * 1024, text))
}

/// Namespace prefixes in scope, one frame per open element (XML
/// Namespaces 1.0 §5: a prefix must be declared by the element or an
/// ancestor; `xml` always is).
#[derive(Default)]
struct Scopes {
    frames: Vec<Vec<Vec<u8>>>,
}

impl Scopes {
    fn declared(&self, prefix: &[u8]) -> bool {
        prefix == b"xml" || self.frames.iter().rev().any(|f| f.iter().any(|p| p == prefix))
    }

    /// Checks an element's attributes (unique, legal, prefixes declared)
    /// and opens its scope. `empty` elements close it again at once.
    fn open(&mut self, e: &BytesStart, empty: bool) -> Result<(), InvalidPayload> {
        let mut frame = Vec::new();
        let mut prefixed = Vec::new();
        // The iterator refuses duplicate attributes (with_checks is on).
        for attr in e.attributes() {
            let attr = attr.map_err(|e| InvalidPayload::odm(format!("not well-formed XML: {e}")))?;
            if let Some(PrefixDeclaration::Named(p)) = attr.key.as_namespace_binding() {
                frame.push(p.to_vec());
            } else if let Some(p) = attr.key.prefix() {
                prefixed.push(p.as_ref().to_vec());
            }
            if attr.value.windows(2).any(|w| w == b"&#") {
                let value = attr
                    .unescape_value()
                    .map_err(|e| InvalidPayload::odm(format!("bad attribute value: {e}")))?;
                if let Some(c) = value.chars().find(|c| !xml_text::is_xml_char(*c)) {
                    return Err(InvalidPayload::odm(format!(
                        "not well-formed XML: a character reference to U+{:04X}, which XML does not allow",
                        c as u32
                    )));
                }
            }
        }
        self.frames.push(frame);
        let element = e.name();
        let undeclared = element
            .prefix()
            .map(|p| p.as_ref().to_vec())
            .into_iter()
            .chain(prefixed)
            .find(|p| !self.declared(p));
        if empty {
            self.frames.pop();
        }
        match undeclared {
            Some(p) => Err(InvalidPayload::odm(format!(
                "not well-formed XML: namespace prefix {:?} is used but never declared",
                String::from_utf8_lossy(&p)
            ))),
            None => Ok(()),
        }
    }

    fn close(&mut self) {
        self.frames.pop();
    }
}

fn scan_buffered(input: impl BufRead) -> Result<OdmSummary, InvalidPayload> {
    let mut reader = Reader::from_reader(input);
    reader.config_mut().check_end_names = true;
    let mut buf = Vec::with_capacity(4096);
    let mut summary = OdmSummary::default();
    let mut depth = 0usize;
    let mut seen_root = false;
    // Inside <AuditRecord>: depth of that element; inside <SourceID>: its text.
    let mut in_audit: Option<usize> = None;
    let mut source_text: Option<String> = None;
    let mut scopes = Scopes::default();
    let mut first = true;
    loop {
        let at = reader.buffer_position();
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| InvalidPayload::odm(format!("not well-formed XML at byte {at}: {e}")))?;
        if matches!(event, Event::Decl(_)) && !first {
            return Err(InvalidPayload::odm(
                "not well-formed XML: an XML declaration is allowed only at the very start",
            ));
        }
        first = false;
        match event {
            Event::DocType(_) => {
                return Err(InvalidPayload::odm(
                    "a DTD is not allowed (entity expansion is refused)",
                ))
            }
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                scopes.open(e, empty)?;
                if depth == 0 {
                    if seen_root {
                        return Err(InvalidPayload::odm("more than one root element"));
                    }
                    seen_root = true;
                    check_root(e, &mut summary)?;
                }
                match e.local_name().as_ref() {
                    b"ClinicalData" => summary.clinical_data += 1,
                    b"SubjectData" => summary.subject_data += 1,
                    b"AuditRecord" => {
                        summary.audit_records += 1;
                        if let Some(id) = attribute(e, b"mdsol:SourceID")? {
                            note_source_id(&mut summary, &id)?;
                        }
                        if !empty {
                            in_audit = Some(depth);
                        }
                    }
                    b"SourceID" if in_audit.is_some() && !empty => source_text = Some(String::new()),
                    _ => {}
                }
                if !empty {
                    depth += 1;
                }
            }
            Event::End(ref e) => {
                scopes.close();
                depth = depth.saturating_sub(1);
                if e.local_name().as_ref() == b"SourceID" {
                    if let Some(text) = source_text.take() {
                        note_source_id(&mut summary, &text)?;
                    }
                }
                if in_audit == Some(depth) {
                    in_audit = None;
                }
            }
            Event::Text(ref t) => {
                let text = t
                    .decode()
                    .map_err(|e| InvalidPayload::odm(format!("bad text encoding: {e}")))?;
                if depth == 0 && !text.trim().is_empty() {
                    return Err(InvalidPayload::odm("text outside the root element"));
                }
                if let Some(s) = source_text.as_mut() {
                    s.push_str(&text);
                }
            }
            Event::GeneralRef(ref r) => {
                let name = r
                    .decode()
                    .map_err(|e| InvalidPayload::odm(format!("bad entity reference: {e}")))?;
                let resolved = match name.as_ref() {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "apos" => '\'',
                    "quot" => '"',
                    _ => match r.resolve_char_ref() {
                        Ok(Some(c)) if xml_text::is_xml_char(c) => c,
                        _ => return Err(InvalidPayload::odm(format!("entity &{name}; is not allowed"))),
                    },
                };
                if let Some(s) = source_text.as_mut() {
                    s.push(resolved);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !seen_root {
        return Err(InvalidPayload::odm("no root element"));
    }
    if depth != 0 {
        return Err(InvalidPayload::odm(
            "the document ends inside an element (truncated?)",
        ));
    }
    Ok(summary)
}

fn attribute(e: &BytesStart, name: &[u8]) -> Result<Option<String>, InvalidPayload> {
    for attr in e.attributes() {
        let attr = attr.map_err(|e| InvalidPayload::odm(format!("bad attribute: {e}")))?;
        if attr.key.as_ref() == name {
            let value = attr
                .unescape_value()
                .map_err(|e| InvalidPayload::odm(format!("bad attribute value: {e}")))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// An attribute by local name, whatever its prefix (`mdsol:` is usual).
fn attribute_local(e: &BytesStart, local: &[u8]) -> Result<Option<String>, InvalidPayload> {
    for attr in e.attributes() {
        let attr = attr.map_err(|e| InvalidPayload::odm(format!("bad attribute: {e}")))?;
        if attr.key.local_name().as_ref() == local {
            let value = attr
                .unescape_value()
                .map_err(|e| InvalidPayload::odm(format!("bad attribute value: {e}")))?;
            return Ok(Some(value.chars().take(200).collect()));
        }
    }
    Ok(None)
}

fn check_root(e: &BytesStart, summary: &mut OdmSummary) -> Result<(), InvalidPayload> {
    // Rave Web Services answers a failed request with `<Response
    // ReasonCode="RWS000nn" ErrorClientResponseMessage="..."/>` (mdsol/rwslib
    // `RWSErrorResponse`): recorded here, judged by the policy's dialect.
    if e.local_name().as_ref() == b"Response" {
        summary.rave_response = Some(RaveResponse {
            reason_code: attribute(e, b"ReasonCode")?,
            message: attribute_local(e, b"ErrorClientResponseMessage")?,
            is_transaction_successful: attribute(e, b"IsTransactionSuccessful")?,
        });
        return Ok(());
    }
    summary.error_description = attribute_local(e, b"ErrorDescription")?;
    if e.local_name().as_ref() != b"ODM" {
        let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
        return Err(InvalidPayload::odm(format!(
            "the root element is <{name}>, not <ODM>"
        )));
    }
    if let Some(ns) = attribute(e, b"xmlns")? {
        if ns.as_bytes() != ODM_NS {
            return Err(InvalidPayload::odm(format!(
                "default namespace {ns:?} is not ODM 1.3"
            )));
        }
    }
    let version = attribute(e, b"ODMVersion")?.ok_or_else(|| InvalidPayload::odm("ODM has no ODMVersion"))?;
    if version != "1.3" && !version.starts_with("1.3.") {
        return Err(InvalidPayload::odm(format!(
            "ODMVersion {version:?} is not 1.3.x"
        )));
    }
    let file_type = attribute(e, b"FileType")?.ok_or_else(|| InvalidPayload::odm("ODM has no FileType"))?;
    if file_type != "Transactional" && file_type != "Snapshot" {
        return Err(InvalidPayload::odm(format!(
            "FileType {file_type:?} is neither Transactional nor Snapshot"
        )));
    }
    summary.odm_version = version;
    summary.file_type = file_type;
    summary.creation = attribute(e, b"CreationDateTime")?;
    Ok(())
}

fn note_source_id(summary: &mut OdmSummary, text: &str) -> Result<(), InvalidPayload> {
    // The length, never the value: error messages reach the audit trail.
    let id: u64 = text.trim().parse().map_err(|e: std::num::ParseIntError| {
        let chars = text.trim().chars().count();
        InvalidPayload::odm(match e.kind() {
            std::num::IntErrorKind::PosOverflow => format!(
                "an AuditRecord SourceID ({chars} digits) is larger than {} (the largest this tool keeps)",
                u64::MAX
            ),
            _ => format!("an AuditRecord SourceID ({chars} characters) is not a whole number"),
        })
    })?;
    summary.max_source_id = Some(summary.max_source_id.map_or(id, |m| m.max(id)));
    summary.min_source_id = Some(summary.min_source_id.map_or(id, |m| m.min(id)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAVE: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<ODM FileType="Transactional" FileOID="4d13722a-4c28-4be8-a9b0-2f7a2c0b9b51" CreationDateTime="2026-12-02T17:08:08.123-00:00"
     ODMVersion="1.3" xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" xmlns="http://www.cdisc.org/ns/odm/v1.3">
  <ClinicalData StudyOID="Mediflex(Prod)" MetaDataVersionOID="1">
    <SubjectData SubjectKey="6b4c8a1e" mdsol:SubjectKeyType="SubjectUUID" mdsol:SubjectName="01-001">
      <SiteRef LocationOID="1001"/>
      <AuditRecord EditPoint="Monitoring" UsedImputationMethod="No" mdsol:AuditSubCategoryName="Entered">
        <UserRef UserOID="isparks"/>
        <LocationRef LocationOID="1001"/>
        <DateTimeStamp>2026-11-04T11:46:46</DateTimeStamp>
        <ReasonForChange/>
        <SourceID>2345</SourceID>
      </AuditRecord>
      <AuditRecord EditPoint="DataManagement" UsedImputationMethod="No">
        <DateTimeStamp>2026-11-04T11:47:00</DateTimeStamp>
        <SourceID>2351</SourceID>
      </AuditRecord>
    </SubjectData>
  </ClinicalData>
</ODM>"#;

    #[test]
    fn accepts_a_real_shaped_rave_audit_file() {
        let s = scan(RAVE.as_bytes()).unwrap();
        assert_eq!(
            (s.odm_version.as_str(), s.file_type.as_str()),
            ("1.3", "Transactional")
        );
        assert_eq!((s.clinical_data, s.subject_data, s.audit_records), (1, 1, 2));
        assert_eq!(s.max_source_id, Some(2351));
    }

    #[test]
    fn a_source_id_too_large_is_called_too_large_not_garbage() {
        let huge = RAVE.replace(
            "<SourceID>2351</SourceID>",
            "<SourceID>100000000000000000000000</SourceID>",
        );
        let err = scan(huge.as_bytes()).unwrap_err().to_string();
        assert!(
            err.contains("24 digits) is larger than 18446744073709551615"),
            "{err}"
        );
        let text = RAVE.replace("<SourceID>2351</SourceID>", "<SourceID>SUBJ-0042</SourceID>");
        let err = scan(text.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("is not a whole number"), "{err}");
    }

    #[test]
    fn rejects_malformed_documents() {
        let cases = [
            RAVE.replace("</SubjectData>", ""),
            RAVE.replace("ODMVersion=\"1.3\"", "ODMVersion=\"1.2\""),
            RAVE.replace("FileType=\"Transactional\"", "FileType=\"Weird\""),
            RAVE.replace("<SourceID>2351</SourceID>", "<SourceID>SUBJ-0042</SourceID>"),
            RAVE.replace("<ODM ", "<NotODM ").replace("</ODM>", "</NotODM>"),
            RAVE.replace("v1.3\">", "v1.2\">"),
            RAVE[..RAVE.len() / 2].to_string(),
            format!("{RAVE}<ODM/>"),
            format!("{RAVE} trailing text"),
            String::new(),
        ];
        for (i, bad) in cases.iter().enumerate() {
            let err = scan(bad.as_bytes()).expect_err(&format!("case {i} accepted"));
            assert!(
                !err.detail.contains("SUBJ-0042"),
                "record content in an error: {}",
                err.detail
            );
        }
    }

    #[test]
    fn rave_error_documents_are_recorded() {
        // mdsol/rwslib rwsobjects.RWSError and RWSErrorResponse docstrings.
        let odm = r#"<?xml version="1.0" encoding="utf-8"?><ODM xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" FileType="Snapshot" CreationDateTime="2013-04-08T10:28:49.578-00:00" FileOID="4d13722a-ceb6-4419-a917-b6ad5d0bc30e" ODMVersion="1.3" mdsol:ErrorDescription="Incorrect login and password combination. [RWS00008]" xmlns="http://www.cdisc.org/ns/odm/v1.3" />"#;
        let s = scan(odm.as_bytes()).unwrap();
        assert_eq!(
            s.error_description.as_deref(),
            Some("Incorrect login and password combination. [RWS00008]")
        );
        let resp = r#"<Response ReferenceNumber="0b47fe86-542f-4070-9e7d-16396a5ef08a" InboundODMFileOID="Not Supplied" IsTransactionSuccessful="0" ReasonCode="RWS00092" ErrorClientResponseMessage="CRF version not found"></Response>"#;
        let r = scan(resp.as_bytes()).unwrap().rave_response.unwrap();
        assert_eq!(r.reason_code.as_deref(), Some("RWS00092"));
        assert_eq!(r.message.as_deref(), Some("CRF version not found"));
    }

    #[test]
    fn refuses_a_dtd_and_custom_entities() {
        let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>
            <ODM ODMVersion="1.3" FileType="Snapshot">&lol2;</ODM>"#;
        assert!(scan(laughs.as_bytes()).unwrap_err().detail.contains("DTD"));
        let custom = r#"<ODM ODMVersion="1.3" FileType="Snapshot"><ClinicalData>&xxe;</ClinicalData></ODM>"#;
        assert!(scan(custom.as_bytes()).is_err());
        let ok =
            r#"<ODM ODMVersion="1.3.2" FileType="Snapshot"><ClinicalData>&amp;&#65;</ClinicalData></ODM>"#;
        assert!(scan(ok.as_bytes()).is_ok());
    }

    #[test]
    fn well_formedness_as_xml_1_0_defines_it() {
        let bad = [
            (
                "undeclared prefix",
                RAVE.replace("mdsol:SubjectName", "rave:SubjectName"),
            ),
            (
                "duplicate attribute",
                RAVE.replace(
                    "EditPoint=\"Monitoring\"",
                    "EditPoint=\"Monitoring\" EditPoint=\"X\"",
                ),
            ),
            ("control character", RAVE.replace("isparks", "is\u{1}parks")),
            (
                "character reference to a control character",
                RAVE.replace("isparks", "is&#1;parks"),
            ),
            (
                "UTF-8 bytes under encoding=\"utf-16\"",
                RAVE.replace("encoding=\"utf-8\"", "encoding=\"utf-16\""),
            ),
            (
                "a declaration after the start",
                RAVE.replace("<ClinicalData", "<?xml version=\"1.0\"?><ClinicalData"),
            ),
        ];
        for (what, doc) in bad {
            assert!(scan(doc.as_bytes()).is_err(), "{what} was accepted");
        }
    }

    #[test]
    fn utf16_and_iso_8859_1_odm_with_matching_declarations_are_accepted() {
        let utf16_doc = RAVE
            .replace("encoding=\"utf-8\"", "encoding=\"UTF-16\"")
            .replace("isparks", "isparks-é");
        for le in [true, false] {
            let mut bytes = if le { vec![0xFF, 0xFE] } else { vec![0xFE, 0xFF] };
            for u in utf16_doc.encode_utf16() {
                bytes.extend_from_slice(&if le { u.to_le_bytes() } else { u.to_be_bytes() });
            }
            let s = scan(&bytes[..]).unwrap_or_else(|e| panic!("UTF-16 (le {le}) refused: {}", e.detail));
            assert_eq!((s.clinical_data, s.subject_data, s.audit_records), (1, 1, 2));
            assert_eq!(s.max_source_id, Some(2351));
        }
        let latin = RAVE.replace("encoding=\"utf-8\"", "encoding=\"ISO-8859-1\"");
        let mut bytes: Vec<u8> = latin
            .replace("isparks", "isparks-\u{e9}")
            .chars()
            .map(|c| c as u8)
            .collect();
        bytes.push(b'\n');
        let s = scan(&bytes[..]).unwrap_or_else(|e| panic!("ISO-8859-1 refused: {}", e.detail));
        assert_eq!(s.audit_records, 2);
        // The same Latin-1 bytes declared as UTF-8 are not well-formed.
        let as_utf8: Vec<u8> = String::from_utf8_lossy(&bytes)
            .replace("ISO-8859-1", "utf-8")
            .into_bytes();
        assert!(
            scan(&as_utf8[..]).is_ok(),
            "lossy conversion made it valid UTF-8: control"
        );
        let mut mislabelled = bytes.clone();
        let at = latin.find("ISO-8859-1").unwrap();
        mislabelled.splice(at..at + "ISO-8859-1".len(), b"utf-8".iter().copied());
        assert!(scan(&mislabelled[..]).is_err(), "Latin-1 bytes declared as UTF-8");
    }
}
