//! Record batches (magic v2) and their compression.
