//! Without `shared`'s `traces` feature: no tracer, and every call does
//! nothing (`TRACING=on` reads as [`Settings::NotBuiltIn`]).

use super::Settings;
use crate::config::Env;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::Registry;

/// No layer: nothing is built in to export with.
pub(crate) fn layer(
    _settings: Settings,
    _env: &dyn Env,
) -> Result<Option<Box<dyn Layer<Registry> + Send + Sync>>, std::io::Error> {
    Ok(None)
}

/// Nothing to continue.
pub fn continue_trace(_span: &tracing::Span, _header: Option<&str>) {}

/// Nothing to link.
pub fn link(_span: &tracing::Span, _header: Option<&str>) {}

/// Nothing to warm up.
pub(crate) fn warm() {}

/// Nothing to send.
pub fn flush() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_without_the_feature_is_reported_and_builds_nothing() {
        let on = [
            ("TRACING", "on"),
            ("AWS_XRAY_DAEMON_ADDRESS", "127.0.0.1:2000"),
        ];
        let settings = Settings::from_env(&on).expect("valid");
        assert_eq!(settings, Settings::NotBuiltIn);
        assert_eq!(settings.describe(), "not built in");
        assert!(layer(settings, &on).expect("no error").is_none());
        assert!(Settings::from_env(&[("TRACING", "yes")]).is_err());
    }
}
