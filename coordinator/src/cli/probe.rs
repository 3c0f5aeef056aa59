//! `probe`: one HTTP GET that exits 0 on a 2xx answer, for container health checks in images
//! that have no shell and no curl (the `FROM scratch` image runs `bookfarm-coordinator probe`).

use anyhow::{Context, bail};
use axum::http::Uri;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Arguments of `probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The URL to get (plain HTTP, as the coordinator's `--http` port serves).
    #[arg(default_value = "http://127.0.0.1:7701/healthz")]
    url: String,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 3)]
    timeout: u64,
}

/// Get the URL; an error unless the answer is 2xx within the timeout.
pub fn run(args: ProbeArgs) -> anyhow::Result<()> {
    let client =
        Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(HttpConnector::new());
    let url: Uri = args
        .url
        .parse()
        .with_context(|| format!("invalid url {:?}", args.url))?;
    let rt = crate::cli::io::runtime()?;
    let status = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(args.timeout), client.get(url.clone()))
            .await
            .with_context(|| format!("no answer from {url} within {} s", args.timeout))?
            .with_context(|| format!("getting {url}"))
            .map(|r| r.status())
    })?;
    if !status.is_success() {
        bail!("{url} answered {status}");
    }
    println!("{url}: {status}");
    Ok(())
}
