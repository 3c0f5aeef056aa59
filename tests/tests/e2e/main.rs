//! The end-to-end tests in one test binary (one link of the workspace instead of one per file):
//! real coordinator and worker processes, stores, a headless browser and the deployment tools;
//! each module's docs say what it covers. `image.rs` stays a binary of its own: it builds the
//! container images with podman (a copy of both binaries per layer) and, with
//! `BOOKFARM_IMAGE_STATIC=1`, the static binaries (minutes of both cores), and no other test
//! should share the machine with that.

mod cluster;
mod deploy;
mod enrol;
mod hostile;
mod polite;
mod reliability;
mod research;
mod tls;
mod trust;
mod volunteer;
mod webui;
