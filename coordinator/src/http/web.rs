//! The web UI's pages and assets, embedded in the binary (`coordinator/web/`): the overview
//! (`/`), workers and contributors (`/workers`), the event log (`/events`), the book explorer
//! (`/explorer`), their script and style, and the vendored charting library (uPlot, MIT,
//! `web/vendor/uplot/LICENSE`).
//!
//! The pages load nothing from any other host and poll the JSON API (`super::api`) every one
//! or two seconds; they never hold a stream open, so headless tools see them finish loading.
//! Data is only ever inserted as text (`textContent`), never as markup.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::LazyLock;

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Name under `/assets/`.
    pub name: &'static str,
    /// MIME type.
    pub content_type: &'static str,
    /// The bytes.
    pub body: &'static str,
}

const fn asset(name: &'static str, content_type: &'static str, body: &'static str) -> Asset {
    Asset {
        name,
        content_type,
        body,
    }
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

/// Every asset under `/assets/`.
pub const ASSETS: &[Asset] = &[
    asset("app.css", CSS, include_str!("../../web/app.css")),
    asset("common.js", JS, include_str!("../../web/common.js")),
    asset("overview.js", JS, include_str!("../../web/overview.js")),
    asset("workers.js", JS, include_str!("../../web/workers.js")),
    asset("explorer.js", JS, include_str!("../../web/explorer.js")),
    asset("events.js", JS, include_str!("../../web/events.js")),
    asset(
        "uPlot.iife.min.js",
        JS,
        include_str!("../../web/vendor/uplot/uPlot.iife.min.js"),
    ),
    asset(
        "uPlot.min.css",
        CSS,
        include_str!("../../web/vendor/uplot/uPlot.min.css"),
    ),
    asset(
        "uPlot.LICENSE.txt",
        "text/plain; charset=utf-8",
        include_str!("../../web/vendor/uplot/LICENSE"),
    ),
];

/// One page: its path, the name in its title and navigation, whether it draws charts, its
/// `<main>` and its script.
#[derive(Debug, Clone, Copy)]
pub struct PageSpec {
    /// URL path.
    pub path: &'static str,
    /// Name in the title and the navigation bar.
    pub name: &'static str,
    /// Loads the charting library.
    pub charts: bool,
    /// The page's `<main>` element.
    pub main: &'static str,
    /// Its script under `/assets/`.
    pub script: &'static str,
}

/// The pages, in navigation order.
pub const PAGE_SPECS: &[PageSpec] = &[
    PageSpec {
        path: "/",
        name: "Overview",
        charts: true,
        main: include_str!("../../web/overview.html"),
        script: "overview.js",
    },
    PageSpec {
        path: "/workers",
        name: "Workers",
        charts: false,
        main: include_str!("../../web/workers.html"),
        script: "workers.js",
    },
    PageSpec {
        path: "/events",
        name: "Events",
        charts: false,
        main: include_str!("../../web/events.html"),
        script: "events.js",
    },
    PageSpec {
        path: "/explorer",
        name: "Explorer",
        charts: true,
        main: include_str!("../../web/explorer.html"),
        script: "explorer.js",
    },
];

const LAYOUT: &str = include_str!("../../web/layout.html");

/// A page's HTML: the shared layout around its `<main>`.
fn render(p: &PageSpec) -> String {
    let nav: String = PAGE_SPECS
        .iter()
        .map(|q| {
            let here = if q.path == p.path {
                " class=\"here\""
            } else {
                ""
            };
            format!("<a href=\"{}\"{here}>{}</a>", q.path, q.name)
        })
        .collect();
    let mut scripts = String::new();
    let mut styles = String::new();
    if p.charts {
        styles.push_str("<link rel=\"stylesheet\" href=\"/assets/uPlot.min.css\">\n");
        scripts.push_str("<script src=\"/assets/uPlot.iife.min.js\"></script>\n");
    }
    scripts.push_str("<script src=\"/assets/common.js\"></script>\n");
    scripts.push_str(&format!("<script src=\"/assets/{}\"></script>\n", p.script));
    LAYOUT
        .replace("{{title}}", &p.name.to_lowercase())
        .replace("{{page}}", &p.name.to_lowercase())
        .replace("{{nav}}", &nav)
        .replace("{{styles}}", &styles)
        .replace("{{scripts}}", &scripts)
        .replace("{{main}}", p.main)
}

/// The pages' HTML, rendered once: (path, html).
pub static PAGES: LazyLock<Vec<(&'static str, String)>> =
    LazyLock::new(|| PAGE_SPECS.iter().map(|p| (p.path, render(p))).collect());

/// Content-Security-Policy of the pages: scripts, styles, images and API calls from this
/// origin only.
pub const CSP: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; \
                       base-uri 'none'; frame-ancestors 'none'";

fn reply(content_type: &'static str, body: &'static str, cache: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r
}

async fn serve_asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        // Assets change only with the binary; pages revalidate them every few minutes.
        Some(a) => reply(a.content_type, a.body, "public, max-age=300"),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}

/// The routes of the pages and assets (merged into `crate::http::router`).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut r = Router::new().route("/assets/{name}", get(serve_asset));
    for (path, html) in PAGES.iter() {
        let html: &'static str = html;
        r = r.route(
            path,
            get(move || async move { reply(HTML, html, "no-cache") }),
        );
    }
    r
}

/// Bytes a browser downloads for `page` before its first API call: the HTML and every asset
/// it names (the page weight in docs/benchmarks.md).
pub fn page_weight(page: &str) -> Option<usize> {
    let html = &PAGES.iter().find(|(p, _)| *p == page)?.1;
    let assets: usize = ASSETS
        .iter()
        .filter(|a| html.contains(&format!("/assets/{}", a.name)))
        .map(|a| a.body.len())
        .sum();
    Some(html.len() + assets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_name_only_embedded_assets_and_no_other_host() {
        for (path, html) in PAGES.iter() {
            for part in html.split("/assets/").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| *c != '"' && *c != '?')
                    .collect();
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{path} names /assets/{name}, which is not embedded"
                );
            }
            for a in std::iter::once(html.as_str()).chain(ASSETS.iter().map(|a| a.body)) {
                for bad in [
                    "src=\"http",
                    "href=\"http",
                    "src=\"//",
                    "href=\"//",
                    "@import",
                ] {
                    assert!(!a.contains(bad), "{path}: {bad} loads from another host");
                }
            }
        }
        // The charting library ships with its license.
        assert!(
            ASSETS
                .iter()
                .any(|a| a.name == "uPlot.LICENSE.txt" && a.body.contains("MIT License"))
        );
    }

    #[test]
    fn every_page_has_the_layout_and_marks_itself_in_the_navigation() {
        for (spec, (path, html)) in PAGE_SPECS.iter().zip(PAGES.iter()) {
            assert_eq!(spec.path, *path);
            assert!(html.starts_with("<!doctype html>"), "{path}");
            assert!(!html.contains("{{"), "{path}: a placeholder left");
            assert_eq!(html.matches("class=\"here\"").count(), 1, "{path}");
            assert!(html.contains(&format!("class=\"here\">{}</a>", spec.name)));
            assert_eq!(html.contains("uPlot.iife.min.js"), spec.charts, "{path}");
            assert!(html.contains(&format!("/assets/{}", spec.script)));
        }
    }

    #[test]
    fn page_weight_counts_the_html_and_its_assets() {
        let w = page_weight("/").expect("overview");
        let uplot = ASSETS
            .iter()
            .find(|a| a.name == "uPlot.iife.min.js")
            .map(|a| a.body.len())
            .expect("uPlot");
        assert!(w > uplot, "the overview loads the charts");
        assert_eq!(page_weight("/nope"), None);
    }
}
