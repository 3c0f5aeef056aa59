//! The `bookfarm-coordinator` binary's commands on real stores, in one test binary (one link of
//! the coordinator instead of one per file).

mod book_search;
mod cli_workers;
mod expand_analyze;
mod import_crash;
mod offline_book;
