//! producer-tokio (work in progress).
