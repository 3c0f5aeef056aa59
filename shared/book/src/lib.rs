//! bookfarm-book (being built).
