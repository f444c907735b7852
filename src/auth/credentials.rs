//! A caching credentials provider, for providers that do not cache themselves.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};

/// How long before their expiry cached credentials are refreshed.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);
/// How long credentials without an expiry are reused before the provider is asked again.
const REUSE_WITHOUT_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// Wraps a credentials provider so that
/// [`SigV4InvokeLayer`](crate::invoke::SigV4InvokeLayer), which resolves credentials for every
/// attempt, does not run the provider every time.
///
/// aws-config's default chain (`aws_config::load_defaults(..).credentials_provider()`) does not
/// cache by itself — the AWS SDK caches in its own identity cache, which this crate does not
/// use — so every attempt would run the whole chain (SSO, STS, instance metadata). Wrap it:
///
/// ```
/// use agentcore_tower::auth::CachedCredentials;
/// use aws_credential_types::Credentials;
/// # let provider = Credentials::new("AKID", "secret", None, None, "example");
/// let credentials = CachedCredentials::new(provider);
/// ```
///
/// Credentials are reused until 5 minutes before their expiry; credentials without an expiry,
/// for 15 minutes. Concurrent attempts wait for one resolution. A failed resolution is not
/// cached: the next attempt asks again.
#[derive(Clone)]
pub struct CachedCredentials {
    shared: Arc<Cache>,
}

struct Cache {
    inner: SharedCredentialsProvider,
    cached: tokio::sync::Mutex<Option<(Credentials, Instant, u64)>>,
    /// Bumped by [`CachedCredentials::invalidate`]: what was cached before is not reused.
    generation: AtomicU64,
}

impl CachedCredentials {
    /// Caches what `provider` resolves.
    pub fn new(provider: impl ProvideCredentials + 'static) -> Self {
        Self {
            shared: Arc::new(Cache {
                inner: SharedCredentialsProvider::new(provider),
                cached: tokio::sync::Mutex::new(None),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// Drops what is cached: the next resolution asks the provider again. The signer does this
    /// when the service says the credentials expired. Clones share the cache.
    pub fn invalidate(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }
}

fn still_fresh(credentials: &Credentials, fetched: Instant) -> bool {
    match credentials.expiry() {
        Some(expiry) => expiry
            .duration_since(SystemTime::now())
            .is_ok_and(|left| left > REFRESH_BEFORE_EXPIRY),
        None => fetched.elapsed() < REUSE_WITHOUT_EXPIRY,
    }
}

impl ProvideCredentials for CachedCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let cache = &self.shared;
            // Held across the refresh: concurrent attempts wait for one resolution.
            let mut cached = cache.cached.lock().await;
            let generation = cache.generation.load(Ordering::SeqCst);
            if let Some((credentials, fetched, of)) = cached.as_ref()
                && *of == generation
                && still_fresh(credentials, *fetched)
            {
                return Ok(credentials.clone());
            }
            let credentials = cache.inner.provide_credentials().await?;
            *cached = Some((credentials.clone(), Instant::now(), generation));
            Ok(credentials)
        })
    }
}

impl fmt::Debug for CachedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the credentials themselves.
        f.debug_struct("CachedCredentials").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::error::CredentialsError;
    use std::sync::atomic::AtomicUsize;

    #[derive(Debug)]
    struct Counting {
        calls: AtomicUsize,
        expiry: Option<SystemTime>,
        fail_first: bool,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail_first && n == 0 {
                return future::ProvideCredentials::ready(Err(CredentialsError::not_loaded("no")));
            }
            future::ProvideCredentials::ready(Ok(Credentials::new(
                format!("AKID{n}"),
                "s",
                None,
                self.expiry,
                "t",
            )))
        }
    }

    #[tokio::test]
    async fn reuses_until_close_to_expiry_and_never_caches_a_failure() {
        let far = Some(SystemTime::now() + Duration::from_secs(3600));
        let cached = CachedCredentials::new(Counting {
            calls: AtomicUsize::new(0),
            expiry: far,
            fail_first: true,
        });
        assert!(cached.provide_credentials().await.is_err());
        let a = cached.provide_credentials().await.unwrap();
        let b = cached.provide_credentials().await.unwrap();
        assert_eq!((a.access_key_id(), b.access_key_id()), ("AKID1", "AKID1"));

        let soon = Some(SystemTime::now() + Duration::from_secs(60));
        let cached = CachedCredentials::new(Counting {
            calls: AtomicUsize::new(0),
            expiry: soon,
            fail_first: false,
        });
        let a = cached.provide_credentials().await.unwrap();
        let b = cached.provide_credentials().await.unwrap();
        assert_eq!(
            (a.access_key_id(), b.access_key_id()),
            ("AKID0", "AKID1"),
            "refreshed near expiry"
        );
        assert_eq!(format!("{cached:?}"), "CachedCredentials { .. }");
        // Invalidated: asked again, though what was cached is still fresh.
        let far = CachedCredentials::new(Counting {
            calls: AtomicUsize::new(0),
            expiry: Some(SystemTime::now() + Duration::from_secs(3600)),
            fail_first: false,
        });
        let a = far.provide_credentials().await.unwrap();
        far.clone().invalidate();
        let b = far.provide_credentials().await.unwrap();
        let c = far.provide_credentials().await.unwrap();
        assert_eq!(
            (a.access_key_id(), b.access_key_id(), c.access_key_id()),
            ("AKID0", "AKID1", "AKID1")
        );
    }
}
