//! bookfarm-worker library: the pull loop and search execution.
