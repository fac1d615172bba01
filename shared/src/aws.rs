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

use crate::Init;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, ConnectorBuilder, proxy::ProxyConfig};

/// `aws_config::defaults` at the latest behaviour version, with the HTTPS
/// client described above. Callers add their own settings (retries) and
/// `.load().await` it.
pub fn config_loader() -> aws_config::ConfigLoader {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(https_client())
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
