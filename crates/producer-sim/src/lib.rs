//! producer-sim (work in progress).
