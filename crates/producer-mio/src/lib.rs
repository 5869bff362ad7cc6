//! producer-mio (work in progress).
