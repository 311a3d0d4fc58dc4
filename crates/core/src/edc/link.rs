//! RFC 8288 `Link` headers: just enough to find `rel="next"` reliably.

/// Why a `Link` header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed Link header: {0}")]
pub struct MalformedLink(pub String);

/// The target of the `rel="next"` link among all `Link` values, if any.
///
/// `rel` may hold several space-separated types (`rel="next last"`) and is
/// compared case-insensitively. Two different `next` targets are an error:
/// following either would be a guess.
pub fn next_target(values: &[&str]) -> Result<Option<String>, MalformedLink> {
    let mut found: Option<String> = None;
    for value in values {
        for (target, params) in split_links(value)? {
            let is_next = params.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("rel")
                    && v.split_ascii_whitespace().any(|r| r.eq_ignore_ascii_case("next"))
            });
            if !is_next {
                continue;
            }
            match &found {
                Some(existing) if *existing != target => {
                    return Err(MalformedLink(format!(
                        "two different rel=\"next\" targets: <{existing}> and <{target}>"
                    )))
                }
                _ => found = Some(target),
            }
        }
    }
    Ok(found)
}

type Link = (String, Vec<(String, String)>);

/// Splits `<a>; rel="x", <b>; rel=y` into targets with their parameters.
fn split_links(value: &str) -> Result<Vec<Link>, MalformedLink> {
    let mut links = Vec::new();
    let mut rest = value.trim();
    while !rest.is_empty() {
        let after_lt = rest
            .strip_prefix('<')
            .ok_or_else(|| MalformedLink(format!("expected '<' at {:?}", truncate(rest))))?;
        let close = after_lt
            .find('>')
            .ok_or_else(|| MalformedLink("unclosed '<'".into()))?;
        let target = after_lt[..close].trim().to_string();
        if target.is_empty() {
            return Err(MalformedLink("empty link target".into()));
        }
        rest = after_lt[close + 1..].trim_start();
        let mut params = Vec::new();
        while let Some(after_semi) = rest.strip_prefix(';') {
            let p = after_semi.trim_start();
            let name_end = p.find(['=', ';', ',']).unwrap_or(p.len());
            let name = p[..name_end].trim().to_string();
            if name.is_empty() {
                return Err(MalformedLink("empty parameter name".into()));
            }
            let mut after = &p[name_end..];
            let mut val = String::new();
            if let Some(v) = after.strip_prefix('=') {
                let v = v.trim_start();
                if let Some(q) = v.strip_prefix('"') {
                    let end = q
                        .find('"')
                        .ok_or_else(|| MalformedLink("unclosed quoted parameter".into()))?;
                    val = q[..end].to_string();
                    after = &q[end + 1..];
                } else {
                    let end = v.find([';', ',']).unwrap_or(v.len());
                    val = v[..end].trim().to_string();
                    after = &v[end..];
                }
            }
            params.push((name, val));
            rest = after.trim_start();
        }
        links.push((target, params));
        rest = match rest.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if rest.is_empty() => rest,
            None => return Err(MalformedLink(format!("unexpected {:?}", truncate(rest)))),
        };
    }
    Ok(links)
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::next_target;

    #[test]
    fn finds_next_among_several_links() {
        let v = r#"<https://h/x?page=1>; rel="prev", <https://h/x?page=3>; rel="next""#;
        assert_eq!(next_target(&[v]).unwrap().as_deref(), Some("https://h/x?page=3"));
        assert_eq!(
            next_target(&["</a?startid=5&per_page=2>; rel=next"])
                .unwrap()
                .as_deref(),
            Some("/a?startid=5&per_page=2")
        );
        assert_eq!(
            next_target(&[r#"<b>; title="a, b; c"; rel="NEXT last""#])
                .unwrap()
                .as_deref(),
            Some("b")
        );
        assert_eq!(
            next_target(&[r#"<a>; rel="prev""#, r#"<c>; rel="next""#])
                .unwrap()
                .as_deref(),
            Some("c")
        );
    }

    #[test]
    fn no_next_is_none() {
        assert_eq!(next_target(&[]).unwrap(), None);
        assert_eq!(next_target(&[r#"<a>; rel="last""#]).unwrap(), None);
    }

    #[test]
    fn malformed_values_are_errors() {
        for bad in [
            "https://h/x; rel=next",
            "<https://h/x; rel=next",
            "<>; rel=next",
            r#"<a>; rel="next"#,
            "<a> junk",
        ] {
            assert!(next_target(&[bad]).is_err(), "{bad:?}");
        }
        assert!(
            next_target(&[r#"<a>; rel="next", <b>; rel="next""#]).is_err(),
            "two different next targets"
        );
    }
}
