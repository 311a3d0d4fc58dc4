//! The Redis the OQ's Redis scenarios run on: the one given (`--redis`),
//! else one answering on the default local port, else a private
//! `redis-server` started for the OQ and stopped with it, if one is
//! installed; else none, and those scenarios are not executed.

use edc_testkit::redis_server::{self, PrivateRedis};

/// The chosen Redis; a private server lives as long as this value.
pub struct OqRedis {
    url: Option<String>,
    _private: Option<PrivateRedis>,
}

impl OqRedis {
    /// Chooses as the module says.
    pub fn choose(given: Option<String>) -> OqRedis {
        if let Some(url) = given.or_else(local_redis) {
            return OqRedis {
                url: Some(url),
                _private: None,
            };
        }
        let private = PrivateRedis::start().ok();
        if let Some(p) = &private {
            tracing::info!(url = %p.url(), "started a private redis-server for the OQ; it is stopped at the end");
        }
        OqRedis {
            url: private.as_ref().map(|p| p.url()),
            _private: private,
        }
    }

    /// Its URL, if there is one.
    pub fn url(&self) -> Option<String> {
        self.url.clone()
    }
}

/// A Redis on the default local port, if one answers PING at once.
fn local_redis() -> Option<String> {
    redis_server::ping(6379).then(|| "redis://127.0.0.1:6379/".to_string())
}
