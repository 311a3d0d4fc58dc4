//! The configured origin (scheme, host, port, and the base URL's path
//! prefix): the only place a credential may be sent. Pagination links and
//! redirects that leave it are refused.
//!
//! A base URL with a path (`https://gateway.example/edc`) is a gateway
//! prefix: every request the tool builds (first page, login) keeps it, and
//! a link outside it is refused like another host. Links are resolved as
//! RFC 3986 says, so a gateway must rewrite the vendor's root-relative
//! links (`/api/...`) to keep its prefix.

use reqwest::Url;

/// Why a URL may not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("base URL {url} is not a valid absolute URL: {detail}")]
    BadBase { url: String, detail: String },
    #[error(
        "base URL {url} must use https (http is allowed only for loopback hosts, such as the simulator)"
    )]
    Insecure { url: String },
    #[error("link {link:?} is not a valid URL reference: {detail}")]
    BadLink { link: String, detail: String },
    #[error("refused {url}: it leaves the configured origin {origin} (the token is never sent elsewhere)")]
    CrossOrigin { url: String, origin: String },
    /// A link or redirect with `user:password@`: credentials come only from
    /// the policy, and a link that carries some is never followed or stored.
    #[error("refused {url}: it carries credentials (user:password@)")]
    Credentials { url: String },
    /// A link that echoes one of this run's secrets back: following it
    /// would write the secret into the cursor and the manifest.
    #[error("refused {url}: it holds one of this run's credentials")]
    EchoedSecret { url: String },
    /// The login answered with a redirect: the password is posted to
    /// `auth.login_path` only, never re-sent where a redirect points.
    #[error(
        "the login was redirected to {url}: not followed, the password is posted only to auth.login_path"
    )]
    LoginRedirected { url: String },
}

/// scheme + host + port + path prefix of the configured base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
    /// The base URL's path without its trailing `/` (empty for none).
    prefix: String,
}

impl Origin {
    /// Parses and checks the base URL from the policy's `base_url_env`.
    pub fn of_base(base: &str) -> Result<(Origin, Url), OriginError> {
        // Every message shows the URL without its userinfo: a base URL that
        // carries a credential is refused, and must not be echoed either.
        // A value that is not even an http(s) URL is not shown at all: it
        // is likely another variable's value (the token, after
        // `base_url_env` and `token_env` were swapped).
        let trimmed = base.trim();
        let lower = trimmed.get(..8).unwrap_or(trimmed).to_ascii_lowercase();
        let shown = if lower.starts_with("http://") || lower.starts_with("https://") {
            format!("{:?}", crate::redact::without_userinfo(trimmed))
        } else {
            "(its value is not shown: it is not an http(s) URL, and may be a secret)".to_string()
        };
        // Checked on the text, before any parser: a password with `/`, `?`
        // or `#` in it ends the authority early, and the parser then sees
        // no userinfo, a host named after the user and the password in
        // the path (where every message and request line would show it).
        if base.contains('@') {
            return Err(OriginError::BadBase {
                url: shown,
                detail: "credentials in the URL are refused (it has an '@'); they come from the policy's \
                         auth variables"
                    .into(),
            });
        }
        let url = Url::parse(base.trim()).map_err(|e| OriginError::BadBase {
            url: shown.clone(),
            detail: e.to_string(),
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            // Never echo it: the userinfo is a credential.
            return Err(OriginError::BadBase {
                url: shown,
                detail: "credentials in the URL are refused; they come from the policy's auth variables"
                    .into(),
            });
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(OriginError::BadBase {
                url: shown,
                detail: "a base URL has no query or fragment".into(),
            });
        }
        let host = url.host_str().unwrap_or_default().to_string();
        if host.is_empty() || !matches!(url.scheme(), "http" | "https") {
            return Err(OriginError::BadBase {
                url: shown,
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
            prefix: url.path().trim_end_matches('/').to_string(),
        };
        Ok((origin, url))
    }

    pub fn matches(&self, url: &Url) -> bool {
        let path = url.path();
        let under_prefix = self.prefix.is_empty()
            || path == self.prefix
            || path
                .strip_prefix(self.prefix.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == self.port
            && under_prefix
    }

    /// The URL of `path` (which starts with `/`) under the base URL's
    /// prefix: how the tool builds every URL it does not get from a link.
    pub fn endpoint(&self, base: &Url, path: &str) -> Result<Url, OriginError> {
        let mut url = base.clone();
        url.set_query(None);
        url.set_fragment(None);
        url.set_path(&format!("{}{path}", self.prefix));
        self.check(&url)?;
        Ok(url)
    }

    /// Resolves `link` (absolute, or relative to `against`) and refuses it
    /// unless it stays on this origin.
    pub fn resolve(&self, against: &Url, link: &str) -> Result<Url, OriginError> {
        let url = against.join(link.trim()).map_err(|e| OriginError::BadLink {
            link: crate::redact::redact_arg(link),
            detail: e.to_string(),
        })?;
        self.check(&url)?;
        if crate::redact::contains_secret(url.as_str()) {
            return Err(OriginError::EchoedSecret {
                url: crate::redact::scrub(url.as_str()).into_owned(),
            });
        }
        Ok(url)
    }

    pub fn check(&self, url: &Url) -> Result<(), OriginError> {
        let shown = || crate::redact::redact_arg(url.as_str());
        if !url.username().is_empty() || url.password().is_some() {
            return Err(OriginError::Credentials { url: shown() });
        }
        if self.matches(url) {
            Ok(())
        } else {
            Err(OriginError::CrossOrigin {
                url: shown(),
                origin: self.to_string(),
            })
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}://{}:{p}{}", self.scheme, self.host, self.prefix),
            None => write!(f, "{}://{}{}", self.scheme, self.host, self.prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password with `/`, `?` or `#` in it ends the authority early: the
    /// URL parser then sees no userinfo at all, a host named after the user
    /// and the password in the path. Found by the secrets property test
    /// (`vendors::no_generated_secret_appears_in_any_output`).
    #[test]
    fn a_password_that_breaks_the_authority_is_refused_and_never_echoed() {
        for base in [
            "http://user:/$A$$01d@127.0.0.1:9",
            "https://user:pa/ss@vault.example.com",
            "https://user:pa?ss@vault.example.com",
            "https://user:pa#ss@vault.example.com",
            "https://vault.example.com/p@th",
        ] {
            let err = Origin::of_base(base).expect_err(base).to_string();
            for secret in ["$A$$01d", "pa/ss", "pa?ss", "pa#ss", "user"] {
                assert!(!err.contains(secret), "{base}: {err}");
            }
            assert!(err.contains("credentials"), "{base}: {err}");
        }
    }

    /// A base URL variable that holds something else (the token, after
    /// `base_url_env` and `token_env` were swapped) is refused without
    /// showing its value: it may be a secret.
    #[test]
    fn a_base_url_that_is_no_url_is_refused_without_its_value() {
        for value in [
            "s3cr3t-T0ken-value",
            "Bearer abc.def.ghi",
            "ftp://files.example/x",
            "abc:def",
        ] {
            let err = Origin::of_base(value).expect_err(value).to_string();
            assert!(!err.contains(value), "{value}: {err}");
            assert!(err.contains("not shown"), "{value}: {err}");
        }
    }

    #[test]
    fn same_origin_links_resolve_and_others_are_refused() {
        let (o, base) = Origin::of_base("https://vault.example.com").unwrap();
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
    fn a_path_prefix_is_part_of_the_origin() {
        let (o, base) = Origin::of_base("https://gw.example/edc/").unwrap();
        assert_eq!(o.to_string(), "https://gw.example:443/edc");
        assert_eq!(
            o.endpoint(&base, "/api/v24.1/auth").unwrap().as_str(),
            "https://gw.example/edc/api/v24.1/auth"
        );
        // A path that names a host is still a path.
        assert_eq!(
            o.endpoint(&base, "//evil.example/x").unwrap().host_str(),
            Some("gw.example")
        );
        assert!(o.resolve(&base, "api/next?offset=5").is_ok());
        for outside in [
            "/api/next",
            "/edcx/api",
            "/edc/../api",
            "https://gw.example/other",
        ] {
            assert!(o.resolve(&base, outside).is_err(), "{outside}");
        }
        let secret = "s3cr3t-pw";
        let err = Origin::of_base(&format!("https://user:{secret}@gw.example/")).unwrap_err();
        assert!(!err.to_string().contains(secret), "{err}");
        assert!(Origin::of_base("https://gw.example/edc?x=1").is_err());
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
