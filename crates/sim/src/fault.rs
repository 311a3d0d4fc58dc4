//! Injectable faults, scheduled by request number.
//!
//! `N=SPEC` makes the Nth request the simulator receives (1-based, counting
//! every request) answer with the fault instead of the page. SPEC is one of:
//!
//! | SPEC | response |
//! |---|---|
//! | `429:seconds:S` | 429, `Retry-After: S` |
//! | `429:date:S` | 429, `Retry-After:` an IMF-fixdate S seconds ahead |
//! | `429:absent` | 429 without `Retry-After` |
//! | `429:raw:TEXT` | 429, `Retry-After: TEXT` verbatim (hostile values) |
//! | `429:bad-date:TEXT` | 429 without Retry-After, `Date: TEXT` verbatim |
//! | `503:seconds:S`, `503:date:S`, `503:absent` | 503, likewise |
//! | `500`, `502`, `504`, `401`, `403`, `404` | that status, no page |
//! | `truncate` | 200, the full Content-Length, half the body, then the connection closes |
//! | `oversize:BYTES` | 200 with a body of BYTES bytes |
//! | `latency:MS` | the page, MS milliseconds late |
//! | `garbage` | 200 with a body that is not valid JSON / ODM |
//! | `backdated` | the JSON page, every record's `modified_date__v` in 1999 (a vendor clock set back) |
//! | `cursor-value:TEXT` | the JSON page, every record's `modified_date__v` set to TEXT (hostile values) |
//! | `content-type:TYPE` | the page, with `Content-Type: TYPE` |
//! | `gzip` | the page, labelled `Content-Encoding: gzip` although the client asked for identity |
//! | `endless` | from this request on, every page has a next link (an API that never ends its window) |
//! | `stall:MS` | the page's headers and half its body, then MS milliseconds of silence (slowloris) |
//! | `cross-origin-next:URL` | the page, with its next link pointing at URL |
//! | `redirect:URL` | 302 to URL |
//! | `redirect-307:URL` | 307 to URL (a POST is re-sent with its body) |
//! | `vault-failure:TYPE` | 200 with Vault's `{"responseStatus":"FAILURE","errors":[{"type":TYPE,...}]}` |
//! | `rave-error:STATUS:CODE` | STATUS with Rave's `<Response ReasonCode="CODE" ...>` |
//! | `rave-odm-error:STATUS:CODE` | STATUS with an ODM whose `mdsol:ErrorDescription` ends `[CODE]` |
//! | `castor-error:STATUS:DETAIL` | STATUS with Castor's problem document whose `detail` is DETAIL; `STATUS/CLAIMED` answers at STATUS a document whose own `status` says CLAIMED (a server that contradicts itself) |
//! | `redcap-error:STATUS:TEXT` | STATUS with REDCap's error TEXT, in the format the request asked for |
//! | `grow` | castor profile: one more study data point is in the collection from this request on (held back by `study_data_held`), inserted among its participant's, so every later page shifts; then the page |

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

/// How a 429 / 503 states its Retry-After.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryAfterForm {
    Seconds(u64),
    /// An HTTP-date this many seconds after the response.
    Date(u64),
    Absent,
    Raw(String),
    /// No Retry-After, and this text as the response's `Date` (a server
    /// whose clock header is garbage).
    BadDate(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Throttle {
        status: u16,
        retry_after: RetryAfterForm,
    },
    Status(u16),
    Truncate,
    Oversize(u64),
    Latency(Duration),
    Garbage,
    /// The JSON page with its records dated 1999.
    Backdated,
    /// The JSON page with every record's `modified_date__v` set to this.
    CursorValue(String),
    ContentType(String),
    /// The page labelled `Content-Encoding: gzip`.
    Gzip,
    Endless,
    /// One more held-back study data point joins the collection.
    Grow,
    Stall(Duration),
    CrossOriginNext(String),
    /// A redirect: 302, or 307 (which keeps a POST's method and body).
    Redirect {
        status: u16,
        url: String,
    },
    /// Vault's HTTP 200 FAILURE with this error type.
    VaultFailure(String),
    /// A Rave error document at this status: `<Response>` or an error ODM.
    RaveError {
        status: u16,
        code: String,
        odm: bool,
    },
    /// Castor's error body (`type`, `title`, `status`, `detail`) at this
    /// status, its own `status` field `claimed` (the same, but for a
    /// server that contradicts itself).
    CastorError {
        status: u16,
        claimed: u16,
        detail: String,
    },
    /// REDCap's JSON error body `{"error": TEXT}` at this status; a TEXT
    /// that says the address is banned is REDCap's ban, sent as plain text.
    RedcapError {
        status: u16,
        text: String,
    },
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(spec: &str) -> Result<Fault, String> {
        let parts: Vec<&str> = spec.splitn(3, ':').collect();
        let number = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("fault {spec:?}: {s:?} is not a whole number"))
        };
        Ok(match parts.as_slice() {
            [code @ ("429" | "503"), rest @ ..] => {
                let retry_after = match rest {
                    ["seconds", s] => RetryAfterForm::Seconds(number(s)?),
                    ["date", s] => RetryAfterForm::Date(number(s)?),
                    ["absent"] | [] => RetryAfterForm::Absent,
                    ["raw", text] => RetryAfterForm::Raw((*text).to_string()),
                    ["bad-date", text] => RetryAfterForm::BadDate((*text).to_string()),
                    _ => return Err(format!("fault {spec:?}: expected {code}:seconds:S, {code}:date:S, {code}:absent, {code}:raw:TEXT or {code}:bad-date:TEXT")),
                };
                Fault::Throttle {
                    status: number(code)? as u16,
                    retry_after,
                }
            }
            [code @ ("500" | "502" | "504" | "401" | "403" | "404")] => Fault::Status(number(code)? as u16),
            ["truncate"] => Fault::Truncate,
            ["oversize", n] => Fault::Oversize(number(n)?),
            ["latency", ms] => Fault::Latency(Duration::from_millis(number(ms)?)),
            ["garbage"] => Fault::Garbage,
            ["backdated"] => Fault::Backdated,
            ["cursor-value", rest @ ..] if !rest.is_empty() => Fault::CursorValue(rest.join(":")),
            ["endless"] => Fault::Endless,
            ["grow"] => Fault::Grow,
            ["gzip"] => Fault::Gzip,
            ["content-type", rest @ ..] if !rest.is_empty() => Fault::ContentType(rest.join(":")),
            ["stall", ms] => Fault::Stall(Duration::from_millis(number(ms)?)),
            ["cross-origin-next", rest @ ..] if !rest.is_empty() => Fault::CrossOriginNext(rest.join(":")),
            ["redirect", rest @ ..] if !rest.is_empty() => Fault::Redirect {
                status: 302,
                url: rest.join(":"),
            },
            ["redirect-307", rest @ ..] if !rest.is_empty() => Fault::Redirect {
                status: 307,
                url: rest.join(":"),
            },
            ["vault-failure", kind] if is_code(kind) => Fault::VaultFailure((*kind).to_string()),
            [form @ ("rave-error" | "rave-odm-error"), status, code] if is_code(code) => {
                let status = number(status)?;
                if !(200..=599).contains(&status) {
                    return Err(format!("fault {spec:?}: {status} is not an HTTP status"));
                }
                Fault::RaveError {
                    status: status as u16,
                    code: code.to_string(),
                    odm: *form == "rave-odm-error",
                }
            }
            ["castor-error", status, detail] if !detail.is_empty() => {
                let (status, claimed) = match status.split_once('/') {
                    Some((status, claimed)) => (number(status)?, number(claimed)?),
                    None => (number(status)?, number(status)?),
                };
                if !(400..=599).contains(&status) || !(400..=599).contains(&claimed) {
                    return Err(format!("fault {spec:?}: {status} is not an HTTP error status"));
                }
                Fault::CastorError {
                    status: status as u16,
                    claimed: claimed as u16,
                    detail: (*detail).to_string(),
                }
            }
            ["redcap-error", status, text] if !text.is_empty() => {
                let status = number(status)?;
                if !(400..=599).contains(&status) {
                    return Err(format!("fault {spec:?}: {status} is not an HTTP error status"));
                }
                Fault::RedcapError {
                    status: status as u16,
                    text: (*text).to_string(),
                }
            }
            ["redcap-error", ..] => {
                return Err(format!(
                    "fault {spec:?}: expected redcap-error:STATUS:TEXT, e.g. redcap-error:403:You do not have permissions to use the API"
                ))
            }
            ["castor-error", ..] => {
                return Err(format!(
                    "fault {spec:?}: expected castor-error:STATUS:DETAIL, e.g. castor-error:404:There are no data points."
                ))
            }
            [form @ ("rave-error" | "rave-odm-error"), ..] => {
                return Err(format!(
                    "fault {spec:?}: expected {form}:STATUS:CODE, e.g. {form}:404:RWS00092"
                ))
            }
            _ => return Err(format!("unknown fault {spec:?} (see `edc-sync simulate --help`)")),
        })
    }
}

/// A fault as its `--fault` spec: what the request log records, so a
/// reader sees `429:date:2`, the form they typed, not Rust's Debug text.
impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Throttle { status, retry_after } => match retry_after {
                RetryAfterForm::Seconds(s) => write!(f, "{status}:seconds:{s}"),
                RetryAfterForm::Date(s) => write!(f, "{status}:date:{s}"),
                RetryAfterForm::Absent => write!(f, "{status}:absent"),
                RetryAfterForm::Raw(text) => write!(f, "{status}:raw:{text}"),
                RetryAfterForm::BadDate(text) => write!(f, "{status}:bad-date:{text}"),
            },
            Fault::Status(status) => write!(f, "{status}"),
            Fault::Truncate => f.write_str("truncate"),
            Fault::Oversize(n) => write!(f, "oversize:{n}"),
            Fault::Latency(d) => write!(f, "latency:{}", d.as_millis()),
            Fault::Garbage => f.write_str("garbage"),
            Fault::Backdated => f.write_str("backdated"),
            Fault::CursorValue(v) => write!(f, "cursor-value:{v}"),
            Fault::ContentType(v) => write!(f, "content-type:{v}"),
            Fault::Gzip => f.write_str("gzip"),
            Fault::Endless => f.write_str("endless"),
            Fault::Grow => f.write_str("grow"),
            Fault::Stall(d) => write!(f, "stall:{}", d.as_millis()),
            Fault::CrossOriginNext(url) => write!(f, "cross-origin-next:{url}"),
            Fault::Redirect { status: 307, url } => write!(f, "redirect-307:{url}"),
            Fault::Redirect { url, .. } => write!(f, "redirect:{url}"),
            Fault::VaultFailure(kind) => write!(f, "vault-failure:{kind}"),
            Fault::RaveError { status, code, odm } => {
                let form = if *odm { "rave-odm-error" } else { "rave-error" };
                write!(f, "{form}:{status}:{code}")
            }
            Fault::CastorError {
                status,
                claimed,
                detail,
            } if claimed != status => write!(f, "castor-error:{status}/{claimed}:{detail}"),
            Fault::CastorError { status, detail, .. } => write!(f, "castor-error:{status}:{detail}"),
            Fault::RedcapError { status, text } => write!(f, "redcap-error:{status}:{text}"),
        }
    }
}

/// Vendor error codes are upper-case letters, digits and `_`.
fn is_code(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Faults by request number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultSchedule(BTreeMap<u64, Fault>);

impl FaultSchedule {
    pub fn insert(&mut self, request: u64, fault: Fault) {
        self.0.insert(request, fault);
    }

    pub fn get(&self, request: u64) -> Option<&Fault> {
        self.0.get(&request)
    }

    /// Parses `N=SPEC`.
    pub fn parse_entry(entry: &str) -> Result<(u64, Fault), String> {
        let (n, spec) = entry
            .split_once('=')
            .ok_or_else(|| format!("fault {entry:?}: expected N=SPEC"))?;
        let n: u64 = n
            .trim()
            .parse()
            .map_err(|_| format!("fault {entry:?}: {n:?} is not a request number"))?;
        if n == 0 {
            return Err(format!("fault {entry:?}: requests are numbered from 1"));
        }
        Ok((n, spec.trim().parse()?))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_fault_is_written_as_its_spec() {
        for spec in [
            "429:seconds:2",
            "503:date:3",
            "429:absent",
            "429:raw:soon",
            "503:bad-date:yesterday",
            "500",
            "truncate",
            "oversize:1024",
            "latency:250",
            "garbage",
            "backdated",
            "cursor-value:2026-01-01T00:00:00Z",
            "content-type:text/html",
            "gzip",
            "endless",
            "grow",
            "stall:100",
            "cross-origin-next:http://evil.example/next",
            "redirect:http://127.0.0.1:1/x",
            "redirect-307:http://127.0.0.1:1/x",
            "vault-failure:API_LIMIT_EXCEEDED",
            "rave-error:404:RWS00092",
            "rave-odm-error:500:RWS00100",
        ] {
            let fault: Fault = spec.parse().unwrap();
            assert_eq!(fault.to_string(), spec);
            assert_eq!(fault.to_string().parse::<Fault>().unwrap(), fault);
        }
    }
    use super::*;

    #[test]
    fn parses_every_documented_form() {
        let ok = [
            (
                "3=429:seconds:2",
                Fault::Throttle {
                    status: 429,
                    retry_after: RetryAfterForm::Seconds(2),
                },
            ),
            (
                "4=429:date:3",
                Fault::Throttle {
                    status: 429,
                    retry_after: RetryAfterForm::Date(3),
                },
            ),
            (
                "5=429:absent",
                Fault::Throttle {
                    status: 429,
                    retry_after: RetryAfterForm::Absent,
                },
            ),
            (
                "6=503:raw:-1",
                Fault::Throttle {
                    status: 503,
                    retry_after: RetryAfterForm::Raw("-1".into()),
                },
            ),
            ("7=500", Fault::Status(500)),
            ("8=truncate", Fault::Truncate),
            ("9=oversize:1000", Fault::Oversize(1000)),
            ("10=latency:250", Fault::Latency(Duration::from_millis(250))),
            (
                "11=cross-origin-next:http://127.0.0.1:9/x",
                Fault::CrossOriginNext("http://127.0.0.1:9/x".into()),
            ),
            (
                "12=redirect:http://127.0.0.1:9/y",
                Fault::Redirect {
                    status: 302,
                    url: "http://127.0.0.1:9/y".into(),
                },
            ),
            ("13=garbage", Fault::Garbage),
            (
                "14=vault-failure:API_LIMIT_EXCEEDED",
                Fault::VaultFailure("API_LIMIT_EXCEEDED".into()),
            ),
            (
                "15=rave-error:404:RWS00092",
                Fault::RaveError {
                    status: 404,
                    code: "RWS00092".into(),
                    odm: false,
                },
            ),
            (
                "17=castor-error:404:There are no data points.",
                Fault::CastorError {
                    status: 404,
                    claimed: 404,
                    detail: "There are no data points.".into(),
                },
            ),
            (
                "18=castor-error:500/404:There are no data points.",
                Fault::CastorError {
                    status: 500,
                    claimed: 404,
                    detail: "There are no data points.".into(),
                },
            ),
            (
                "16=rave-odm-error:200:RWS00008",
                Fault::RaveError {
                    status: 200,
                    code: "RWS00008".into(),
                    odm: true,
                },
            ),
        ];
        for (text, fault) in ok {
            assert_eq!(FaultSchedule::parse_entry(text).unwrap().1, fault, "{text}");
        }
        for bad in [
            "x=500",
            "0=500",
            "3=418",
            "3=429:soon",
            "3=oversize",
            "3",
            "3=vault-failure:lower",
            "3=rave-error:99:RWS1",
            "3=rave-error:404",
        ] {
            assert!(FaultSchedule::parse_entry(bad).is_err(), "{bad}");
        }
    }
}
