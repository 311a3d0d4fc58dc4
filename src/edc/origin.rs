//! The configured origin (scheme, host, port): the only place the token may
//! be sent. Pagination links and redirects that leave it are refused.

use reqwest::Url;

/// Why a URL may not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("base URL {url:?} is not a valid absolute URL: {detail}")]
    BadBase { url: String, detail: String },
    #[error(
        "base URL {url} must use https (http is allowed only for loopback hosts, such as the simulator)"
    )]
    Insecure { url: String },
    #[error("link {link:?} is not a valid URL reference: {detail}")]
    BadLink { link: String, detail: String },
    #[error("refused {url}: it leaves the configured origin {origin} (the token is never sent elsewhere)")]
    CrossOrigin { url: String, origin: String },
}

/// scheme + host + port of the configured base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    /// Parses and checks the base URL from the policy's `base_url_env`.
    pub fn of_base(base: &str) -> Result<(Origin, Url), OriginError> {
        let url = Url::parse(base.trim()).map_err(|e| OriginError::BadBase {
            url: base.to_string(),
            detail: e.to_string(),
        })?;
        let host = url.host_str().unwrap_or_default().to_string();
        if host.is_empty() || !matches!(url.scheme(), "http" | "https") {
            return Err(OriginError::BadBase {
                url: base.to_string(),
                detail: "needs http(s)://host".into(),
            });
        }
        let loopback = host == "localhost"
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if url.scheme() == "http" && !loopback {
            return Err(OriginError::Insecure { url: url.to_string() });
        }
        let origin = Origin {
            scheme: url.scheme().to_string(),
            host,
            port: url.port_or_known_default(),
        };
        Ok((origin, url))
    }

    pub fn matches(&self, url: &Url) -> bool {
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == self.port
    }

    /// Resolves `link` (absolute, or relative to `against`) and refuses it
    /// unless it stays on this origin.
    pub fn resolve(&self, against: &Url, link: &str) -> Result<Url, OriginError> {
        let url = against.join(link.trim()).map_err(|e| OriginError::BadLink {
            link: link.to_string(),
            detail: e.to_string(),
        })?;
        self.check(&url)?;
        Ok(url)
    }

    pub fn check(&self, url: &Url) -> Result<(), OriginError> {
        if self.matches(url) {
            Ok(())
        } else {
            Err(OriginError::CrossOrigin {
                url: url.to_string(),
                origin: self.to_string(),
            })
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}://{}:{p}", self.scheme, self.host),
            None => write!(f, "{}://{}", self.scheme, self.host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_links_resolve_and_others_are_refused() {
        let (o, base) = Origin::of_base("https://vault.example.com/api/").unwrap();
        assert_eq!(
            o.resolve(&base, "/api/next?offset=5").unwrap().as_str(),
            "https://vault.example.com/api/next?offset=5"
        );
        assert_eq!(
            o.resolve(&base, "https://vault.example.com:443/x")
                .unwrap()
                .path(),
            "/x"
        );
        for bad in [
            "https://evil.example.com/x",
            "http://vault.example.com/x",
            "https://vault.example.com:8443/x",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "//evil.example.com/x",
        ] {
            assert!(
                matches!(o.resolve(&base, bad), Err(OriginError::CrossOrigin { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn plain_http_only_on_loopback() {
        assert!(Origin::of_base("http://127.0.0.1:8080").is_ok());
        assert!(Origin::of_base("http://localhost:8080").is_ok());
        assert!(Origin::of_base("http://[::1]:8080").is_ok());
        assert!(matches!(
            Origin::of_base("http://vault.example.com"),
            Err(OriginError::Insecure { .. })
        ));
        assert!(matches!(
            Origin::of_base("ftp://h/x"),
            Err(OriginError::BadBase { .. })
        ));
        assert!(matches!(
            Origin::of_base("not a url"),
            Err(OriginError::BadBase { .. })
        ));
    }
}
