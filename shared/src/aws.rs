//! The AWS SDK's configuration, loaded once per cold start by the functions
//! that call AWS (cargo feature `aws`).
//!
//! The HTTPS client is the SDK's default one (hyper and rustls, roots from the
//! system or `SSL_CERT_FILE`, `HTTP(S)_PROXY` and `NO_PROXY` honoured) with one
//! change: rustls runs on ring instead of aws-lc. Measured at a 256 MB
//! function's CPU share, aws-lc's first handshake spends about 170 ms seeding
//! its random generator (ring: about 1 ms), and aws-lc adds about 2 MiB to
//! every binary (BENCHMARKS.md, "First invocation"). What ring lacks: the
//! post-quantum hybrid key exchange (X25519MLKEM768) that aws-lc offers AWS
//! endpoints; X25519 is used instead. To go back, enable the SDK crates'
//! `default-https-client` feature and drop `.http_client(..)` below.

//!
//! Behaviour is pinned: the SDK's behaviour version by name (not `latest()`,
//! which moves with a `cargo update` and with it the default retries and
//! timeouts), and every retry and timeout setting a client relies on is set
//! here from the function's [`ClientSettings`], whatever the version's
//! defaults.

use crate::Init;
use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, ConnectorBuilder, proxy::ProxyConfig};
use std::time::Duration;

/// The SDK behaviour version the functions are written and tested against.
/// A newer one changes defaults (retries, backoff, timeouts); move to it on
/// purpose, with the functions' retry tests, not with a `cargo update`.
pub fn behavior_version() -> BehaviorVersion {
    BehaviorVersion::v2026_01_12()
}

/// The retries and timeouts of a function's SDK clients, each set explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSettings {
    /// Attempts per call, the first included; 1 turns the SDK's retries off
    /// (for a function that retries itself, against its deadline).
    pub max_attempts: u32,
    /// Backoff before the first retry (exponential with jitter after it, up
    /// to [`Self::max_backoff`]).
    pub initial_backoff: Duration,
    /// Longest backoff between two attempts.
    pub max_backoff: Duration,
    /// Longest wait to open a connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Longest wait for a response's first byte after the request.
    pub read_timeout: Duration,
    /// One attempt, from the request to the whole response.
    pub attempt_timeout: Duration,
    /// One call: every attempt and backoff.
    pub operation_timeout: Duration,
}

impl ClientSettings {
    /// The SDK's retry configuration: standard mode, or none for one attempt.
    pub fn retry_config(&self) -> RetryConfig {
        if self.max_attempts <= 1 {
            return RetryConfig::disabled();
        }
        RetryConfig::standard()
            .with_max_attempts(self.max_attempts)
            .with_initial_backoff(self.initial_backoff)
            .with_max_backoff(self.max_backoff)
    }

    /// The SDK's timeout configuration: all four timeouts set.
    pub fn timeout_config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .operation_attempt_timeout(self.attempt_timeout)
            .operation_timeout(self.operation_timeout)
            .build()
    }
}

/// `aws_config::defaults` at [`behavior_version`], with the HTTPS client
/// described above and `settings`' retries and timeouts. Callers
/// `.load().await` it: the only way the functions build their SDK
/// configuration.
pub fn config_loader(settings: &ClientSettings) -> aws_config::ConfigLoader {
    aws_config::defaults(behavior_version())
        .http_client(https_client())
        .retry_config(settings.retry_config())
        .timeout_config(settings.timeout_config())
}

/// The SDK's default HTTPS client (one connection pool per connector
/// settings, the SDK's sleep for timeouts, proxies from the environment) on
/// ring.
pub fn https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    https_client_on(CryptoMode::Ring)
}

/// [`https_client`] with rustls on `crypto` (the lab measures both providers
/// with it).
pub fn https_client_on(
    crypto: CryptoMode,
) -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    Builder::new().build_with_connector_fn(move |settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(Provider::Rustls(crypto.clone()));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    })
}

/// Whether to open connections during init: the setting allows it and the
/// SDK has somewhere to connect (a region; without one, every call would fail
/// before reaching the network).
pub fn opens_connections(init: &Init, sdk: &aws_config::SdkConfig) -> bool {
    init.open_connections && sdk.region().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: ClientSettings = ClientSettings {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        connect_timeout: Duration::from_millis(1_500),
        read_timeout: Duration::from_secs(4),
        attempt_timeout: Duration::from_secs(5),
        operation_timeout: Duration::from_secs(20),
    };

    /// What a client built from the loaded configuration will use: every
    /// setting as given, whatever the behaviour version's defaults.
    #[tokio::test]
    async fn clients_get_every_retry_and_timeout_setting_and_the_pinned_behaviour() {
        for settings in [
            SETTINGS,
            ClientSettings {
                max_attempts: 1,
                ..SETTINGS
            },
        ] {
            let sdk = config_loader(&settings)
                .region(aws_config::Region::new("eu-west-1"))
                .no_credentials()
                .load()
                .await;
            let retry = sdk.retry_config().expect("a retry configuration");
            assert_eq!(retry.max_attempts(), settings.max_attempts);
            if settings.max_attempts > 1 {
                assert_eq!(retry.initial_backoff(), settings.initial_backoff);
                assert_eq!(retry.max_backoff(), settings.max_backoff);
            }
            let timeouts = sdk.timeout_config().expect("a timeout configuration");
            assert_eq!(timeouts.connect_timeout(), Some(settings.connect_timeout));
            assert_eq!(timeouts.read_timeout(), Some(settings.read_timeout));
            assert_eq!(
                timeouts.operation_attempt_timeout(),
                Some(settings.attempt_timeout)
            );
            assert_eq!(
                timeouts.operation_timeout(),
                Some(settings.operation_timeout)
            );
            assert!(
                sdk.behavior_version() == Some(behavior_version()),
                "the behaviour version is the pinned one"
            );
        }
    }

    #[test]
    fn connections_are_opened_only_when_allowed_and_somewhere_to_go() {
        let on = Init::decide(&[]).unwrap();
        let off = Init::decide(&[("OPEN_CONNECTIONS_AT_INIT", "false")]).unwrap();
        let region = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("eu-west-1"))
            .build();
        let nowhere = aws_config::SdkConfig::builder().build();
        assert!(opens_connections(&on, &region));
        assert!(!opens_connections(&off, &region));
        assert!(!opens_connections(&on, &nowhere));
    }
}
