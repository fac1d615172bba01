//! moto (the pinned version from `tools`) on a free 127.0.0.1 port, as the
//! local Step Functions and S3: its state-machine interpreter runs executions,
//! and their Lambda tasks call the local Lambda Invoke API (see
//! `tools/local-stack/python/moto_server.py`). Stopped on drop. The template's S3
//! buckets are created on it by [`create_buckets`], its state machines by
//! [`crate::step_functions`].

use crate::local_aws::{ACCESS_KEY, REGION};
use crate::process::{Guard, free_port, wait_for_port};
use crate::template::Template;
use crate::tools;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The account moto puts in the ARNs it makes (its default, the local stack's).
pub use crate::local_aws::ACCOUNT_ID;

/// A running moto server.
#[derive(Debug)]
pub struct Moto {
    guard: Guard,
    port: u16,
    log: PathBuf,
}

impl Moto {
    /// Start moto on a free port; Lambda tasks go to the Invoke API at
    /// `lambda_endpoint` (`http://127.0.0.1:PORT`); its output goes to `log`.
    pub fn start(lambda_endpoint: &str, log: &Path) -> Result<Self, String> {
        Self::start_on(
            free_port().map_err(|e| e.to_string())?,
            lambda_endpoint,
            log,
        )
    }

    /// Start moto on `port` (chosen beforehand with [`free_port`], e.g. so that
    /// a TLS front and the functions' environment can name it first).
    pub fn start_on(port: u16, lambda_endpoint: &str, log: &Path) -> Result<Self, String> {
        tools::require(&tools::moto_python(), "moto")?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(tools::moto_python());
        command
            .arg(tools::moto_launcher())
            .args(["--port", &port.to_string()])
            .args(["--lambda-endpoint", lambda_endpoint])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let guard = Guard::spawn("moto", &mut command)?;
        let mut moto = Self {
            guard,
            port,
            log: log.to_path_buf(),
        };
        moto.wait_until_ready(Duration::from_secs(60))
            .map_err(|e| format!("moto: {e}; see {}", log.display()))?;
        Ok(moto)
    }

    /// Wait until moto answers a Step Functions request on its port (importing
    /// moto takes seconds on a busy machine). Something else on the port, e.g.
    /// a server that took it between [`free_port`] and the start, is an error.
    fn wait_until_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = std::time::Instant::now() + timeout;
        wait_for_port(self.port, timeout)?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        loop {
            if let Some(status) = self.guard.exited() {
                return Err(format!("it exited ({status})"));
            }
            let answer = agent
                .post(self.endpoint())
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-target", "AWSStepFunctions.ListStateMachines")
                .header("authorization", authorization("states"))
                .send("{}")
                .ok()
                .and_then(|response| response.into_body().read_to_string().ok());
            if answer.is_some_and(|body| body.contains("\"stateMachines\"")) {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "127.0.0.1:{} did not answer as moto within {timeout:?}",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// Everything the server printed so far (one line per request, and the
    /// interpreter's warnings).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// An `Authorization` header in SigV4's form for `service` (`s3`, `states`).
/// moto checks no signature; it reads the service from the credential scope
/// to route the request, as requests to one port reach every service.
pub fn authorization(service: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20260101/{REGION}/{service}/aws4_request, \
         SignedHeaders=host, Signature=0"
    )
}

/// The names of the template's `AWS::S3::Bucket`s: their logical ids, what
/// `!Ref` of each resolves to in a function's environment.
pub fn bucket_names(template: &Template) -> Vec<String> {
    template
        .resources("AWS::S3::Bucket")
        .into_iter()
        .map(|(logical_id, _)| logical_id)
        .collect()
}

/// Create every `AWS::S3::Bucket` of the template on the moto at `endpoint`,
/// named by logical id; their names.
pub fn create_buckets(template: &Template, endpoint: &str) -> Result<Vec<String>, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let names = bucket_names(template);
    for name in &names {
        // Path-style, as the functions address the local server.
        let url = format!("{endpoint}/{name}");
        let response = agent
            .put(&url)
            .header("authorization", authorization("s3"))
            .send_empty()
            .map_err(|e| format!("create bucket {name}: {e}"))?;
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.into_body().read_to_string().unwrap_or_default();
            return Err(format!("create bucket {name}: HTTP {status}: {body}"));
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_named_as_the_functions_environment_names_them() {
        let template = crate::fixtures::template();
        let buckets = bucket_names(&template);
        assert_eq!(buckets, ["FixtureBucket"]);
        let reporter = template
            .function("fixture-reporter")
            .expect("the fixture reporter");
        let bucket = reporter.env.iter().find(|(key, _)| key == "BUCKET");
        assert_eq!(
            bucket.map(|(_, value)| value.as_str()),
            Some(buckets[0].as_str())
        );
    }

    #[test]
    fn the_authorization_names_the_service_in_its_credential_scope() {
        let header = authorization("states");
        let scope = header
            .split(',')
            .next()
            .and_then(|first| first.split_whitespace().nth(1))
            .and_then(|credential| credential.strip_prefix("Credential="))
            .map(|scope| scope.split('/').collect::<Vec<_>>());
        assert_eq!(
            scope,
            Some(vec![
                ACCESS_KEY,
                "20260101",
                REGION,
                "states",
                "aws4_request"
            ])
        );
    }
}
