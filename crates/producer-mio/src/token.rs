//! OAUTHBEARER tokens off the event loop: the application's provider (which may block, e.g.
//! on an HTTP call to an identity provider) runs on a helper thread, started at the first
//! request; its answer comes back through a channel, waking the loop with the `mio::Waker`.

use std::fmt;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread;

use mio::Waker;
use producer_core::{Callback, Event, OAuthToken};
use producer_driver::call_user;

/// The application's OAUTHBEARER token provider: called on the helper thread, once per
/// `Output::TokenRequest` (the core asks once at a time).
pub(crate) type Provider = Box<dyn FnMut() -> Result<OAuthToken, String> + Send>;

/// What the helper thread answers: the provider's token (or its error), or the event that
/// names its panic.
pub(crate) type Answer = Result<Result<OAuthToken, String>, Event>;

/// The helper thread and its channels. It exits when the driver (and so the request sender)
/// is dropped, after the call in progress, if any.
pub(crate) struct TokenFetcher {
    waker: Arc<Waker>,
    provider: Option<Provider>,
    requests: Option<Sender<()>>,
    answers: Option<Receiver<Answer>>,
}

impl fmt::Debug for TokenFetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenFetcher")
            .field("running", &self.requests.is_some())
            .finish_non_exhaustive()
    }
}

impl TokenFetcher {
    pub(crate) fn new(waker: Arc<Waker>, provider: Provider) -> Self {
        TokenFetcher {
            waker,
            provider: Some(provider),
            requests: None,
            answers: None,
        }
    }

    /// Asks the provider for a token; its answer comes from [`TokenFetcher::try_next`] after
    /// the waker fires. `Err` with the reason when it cannot be asked (its thread could not
    /// start, or is gone): the caller answers the core with that reason.
    pub(crate) fn request(&mut self) -> Result<(), String> {
        if self.requests.is_none() {
            self.spawn()?;
        }
        match &self.requests {
            Some(tx) if tx.send(()).is_ok() => Ok(()),
            _ => {
                self.requests = None;
                self.answers = None;
                Err("the OAUTHBEARER token provider's thread is gone".into())
            }
        }
    }

    /// The provider's answer, if it has come. Never blocks.
    pub(crate) fn try_next(&mut self) -> Option<Answer> {
        let rx = self.answers.as_ref()?;
        match rx.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.requests = None;
                self.answers = None;
                Some(Ok(Err(
                    "the OAUTHBEARER token provider's thread is gone".into()
                )))
            }
        }
    }

    fn spawn(&mut self) -> Result<(), String> {
        let Some(mut provider) = self.provider.take() else {
            return Err("the OAUTHBEARER token provider's thread is gone".into());
        };
        let (req_tx, req_rx) = mpsc::channel::<()>();
        let (ans_tx, ans_rx) = mpsc::channel();
        let waker = self.waker.clone();
        thread::Builder::new()
            .name("producer-mio-token".into())
            .spawn(move || {
                for () in req_rx {
                    // A provider that panics answers with the event that names the panic; the
                    // thread goes on.
                    let token = call_user(Callback::TokenProvider, &mut provider);
                    if ans_tx.send(token).is_err() {
                        return;
                    }
                    if let Err(e) = waker.wake() {
                        tracing::warn!(error = %e, "token provider could not wake the event loop");
                    }
                }
            })
            .map_err(|e| format!("cannot start the OAUTHBEARER token provider's thread: {e}"))?;
        self.requests = Some(req_tx);
        self.answers = Some(ans_rx);
        Ok(())
    }
}
