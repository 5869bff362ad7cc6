//! The application's OAUTHBEARER token provider: an async function the producer task runs in
//! a task of its own whenever the core asks for a token, so a slow identity provider never
//! holds up the producer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use producer_core::{Callback, Event, OAuthToken};
use producer_driver::panic::panic_message;

/// What the provider's future gives: a token, or why there is none.
pub(crate) type TokenResult = Result<OAuthToken, String>;

type BoxedFuture = Pin<Box<dyn Future<Output = TokenResult> + Send>>;

/// A provider set with [`crate::ProducerBuilder::oauth_token_provider`].
#[derive(Clone)]
pub(crate) struct TokenProvider(Arc<dyn Fn() -> BoxedFuture + Send + Sync>);

impl fmt::Debug for TokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenProvider")
    }
}

impl TokenProvider {
    pub(crate) fn new<F, Fut>(provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TokenResult> + Send + 'static,
    {
        TokenProvider(Arc::new(move || Box::pin(provider())))
    }

    /// Runs the provider in a task of its own (the call that makes its future too) and
    /// resolves to its answer; a provider that panics resolves to the
    /// [`Event::CallbackPanicked`] that names it (the producer then answers the core with an
    /// error).
    pub(crate) async fn fetch(&self) -> Result<TokenResult, Event> {
        let provider = self.0.clone();
        match tokio::spawn(async move { provider().await }).await {
            Ok(token) => Ok(token),
            Err(e) if e.is_panic() => Err(Event::CallbackPanicked {
                callback: Callback::TokenProvider,
                message: panic_message(&*e.into_panic()),
            }),
            Err(_) => Ok(Err(
                "the OAUTHBEARER token provider's task was cancelled".into()
            )),
        }
    }
}
