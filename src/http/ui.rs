//! The dashboard at `/ui`: plain HTML, CSS and JavaScript from `ui/`,
//! embedded in the binary. Open like `/docs`: the page asks for the token
//! and speaks only the public `/v1` API from the browser. Not part of the
//! OpenAPI document.

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;

/// Everything from this origin only: no inline script or style, no
/// framing, API calls to this origin alone.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A file of the dashboard: where it is served, its content type, its bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX: &str = include_str!("../../ui/index.html");

const ASSETS: [Asset; 5] = [
    Asset {
        path: "/ui",
        content_type: "text/html; charset=utf-8",
        body: INDEX,
    },
    Asset {
        path: "/ui/",
        content_type: "text/html; charset=utf-8",
        body: INDEX,
    },
    Asset {
        path: "/ui/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/app.js"),
    },
    Asset {
        path: "/ui/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../ui/style.css"),
    },
    Asset {
        path: "/ui/favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../../ui/favicon.svg"),
    },
];

/// The dashboard's routes; any state, since the files need none.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    ASSETS.iter().fold(Router::new(), |router, asset| {
        let (content_type, body) = (asset.content_type, asset.body);
        router.route(
            asset.path,
            get(move || async move { serve(content_type, body) }),
        )
    })
}

fn serve(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let headers: [(HeaderName, HeaderValue); 6] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        // A new binary may bring new files: revalidate rather than reuse.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_page_links_is_served() {
        let linked: Vec<&str> = INDEX
            .split(['"', '\''])
            .filter(|part| part.starts_with("/ui/"))
            .collect();
        assert!(
            linked.len() >= 3,
            "index.html links its script, style and icon"
        );
        for path in linked {
            assert!(
                ASSETS.iter().any(|asset| asset.path == path),
                "index.html links {path}, which is not served"
            );
        }
    }

    #[test]
    fn the_policy_allows_nothing_inline_and_no_other_origin() {
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
        assert!(!CONTENT_SECURITY_POLICY.contains("http"));
        assert!(!CONTENT_SECURITY_POLICY.contains('*'));
    }
}
