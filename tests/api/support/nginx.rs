//! A real nginx on loopback in front of prioq instances, configured as in
//! deploy/.

use std::path::PathBuf;
use std::time::Duration;

use prioq_testbed::Wrapper;
use reqwest::StatusCode;
use tokio::time::Instant;

use super::process::TempDir;
use super::redis_server::free_port;

/// The nginx binary: on PATH, or where Debian puts it (/usr/sbin, which a
/// non-root PATH may lack).
fn nginx_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("nginx"))
        .find(|binary| binary.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed, and the proxy tests need it: scripts/test installs \
                 Debian's nginx package (apt-get install nginx), as CI does"
            )
        })
}

/// A real nginx in front of prioq instances, with everything it writes in
/// its own temporary directory. It dies with the test process even on a
/// crash: its wrapper shell stops it when the test process's pipe closes.
#[derive(Debug)]
pub(crate) struct Nginx {
    base: String,
    /// Stops nginx and waits for it when dropped, before `dir` goes.
    _wrapper: Wrapper,
    dir: TempDir,
}

impl Nginx {
    /// Starts nginx with `upstreams` (their `base` URLs) in one upstream
    /// group, and waits until it proxies.
    pub(crate) async fn start(upstreams: &[&str]) -> Self {
        let binary = nginx_binary();
        let dir = TempDir::new("nginx");
        let port = free_port();
        let servers: String = upstreams
            .iter()
            .map(|base| {
                let address = base.trim_start_matches("http://");
                format!("        server {address} max_fails=1 fail_timeout=5s;\n")
            })
            .collect();
        let root = dir.path.display();
        let conf = format!(
            r#"daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;

events {{
    worker_connections 1024;
}}

http {{
    log_format ids '$prioq_request_id $status';
    access_log {root}/access.log ids;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;

    upstream prioq {{
{servers}        keepalive 16;
    }}

    # The client's request id when it sent one, else nginx's own.
    map $http_x_request_id $prioq_request_id {{
        ""      $request_id;
        default $http_x_request_id;
    }}

    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 1100k;

        location = /nginx-health {{
            return 200 "ok\n";
        }}

        location / {{
            proxy_pass http://prioq;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Request-Id $prioq_request_id;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 2s;
            # Above the largest wait_ms (20 s) a long poll may ask for.
            proxy_read_timeout 30s;
            proxy_send_timeout 30s;
        }}
    }}
}}
"#
        );
        std::fs::write(dir.path.join("nginx.conf"), conf).expect("nginx.conf written");
        let wrapper = Wrapper::start(
            "\"$0\" -p \"$1\" -c \"$1/nginx.conf\" -e \"$1/error.log\" & pid=$!; \
             echo started; read _; kill -TERM $pid; wait $pid",
            &[binary.as_os_str(), dir.path.as_os_str()],
        );
        let nginx = Self {
            base: format!("http://127.0.0.1:{port}"),
            _wrapper: wrapper,
            dir,
        };
        nginx.until_proxying().await;
        nginx
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path.join("access.log")).unwrap_or_default()
    }

    /// The access log once it holds `line`: nginx writes a request's line
    /// after its answer went out, so a client can read the answer first.
    /// Gives up after five seconds and answers the log as it is.
    pub(crate) async fn access_log_with(&self, line: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.access_log();
            if log.lines().any(|l| l == line) || Instant::now() > deadline {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path.join("error.log")).unwrap_or_default()
    }

    async fn until_proxying(&self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = http.get(self.url("/healthz")).send().await;
            if answer.is_ok_and(|a| a.status() == StatusCode::OK) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nginx ({}) never proxied /healthz; its error log:\n{}",
                nginx_binary().display(),
                self.error_log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
