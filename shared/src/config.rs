//! Reading settings from the environment, once, with errors that name the setting.
//!
//! Every module that needs a setting takes an [`Env`] instead of calling
//! `std::env::var` itself, so tests can hand in a table of values (changing the
//! real process environment is `unsafe` in edition 2024, and racy in tests).

use std::fmt;

/// A source of environment variables: the process environment in production, a
/// fixed table in tests.
pub trait Env {
    /// The value of `name`, `Ok(None)` if unset, or an error if it is not UTF-8.
    fn get(&self, name: &'static str) -> Result<Option<String>, ConfigError>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, name: &'static str) -> Result<Option<String>, ConfigError> {
        match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(raw)) => Err(ConfigError::new(
                name,
                raw.to_string_lossy(),
                "is not valid UTF-8",
            )),
        }
    }
}

/// A fixed table of variables, for tests and tools.
impl Env for &[(&'static str, &'static str)] {
    fn get(&self, name: &'static str) -> Result<Option<String>, ConfigError> {
        Ok(self
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned()))
    }
}

/// A fixed table of variables, for tests and tools.
impl<const N: usize> Env for [(&'static str, &'static str); N] {
    fn get(&self, name: &'static str) -> Result<Option<String>, ConfigError> {
        Env::get(&self.as_slice(), name)
    }
}

/// A setting with a value that cannot be used. Its `Display` is the one line a
/// function prints before it exits at cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The name of the setting (environment variable or file) at fault.
    pub setting: &'static str,
    /// The offending value, shortened if long.
    pub value: String,
    /// What a valid value looks like.
    pub reason: String,
}

impl ConfigError {
    /// Build an error for `setting`; `value` is cut to 64 characters.
    pub fn new(setting: &'static str, value: impl AsRef<str>, reason: impl Into<String>) -> Self {
        let value: String = value.as_ref().chars().take(64).collect();
        Self {
            setting,
            value,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}={:?}: {}",
            self.setting, self.value, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}

/// Parse an integer setting within `range`, naming the setting on error.
pub fn parse_in_range(
    setting: &'static str,
    raw: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let reason = || {
        format!(
            "must be a whole number from {} to {}",
            range.start(),
            range.end()
        )
    };
    let value: u64 = raw
        .trim()
        .parse()
        .map_err(|_| ConfigError::new(setting, raw, reason()))?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(setting, raw, reason()))
    }
}

/// An optional integer setting: `default` when unset, else parsed within `range`.
pub fn number_or(
    env: &dyn Env,
    setting: &'static str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    env.get(setting)?
        .map_or(Ok(default), |raw| parse_in_range(setting, &raw, range))
}

/// The required DynamoDB table name in `setting` (`purpose` says what it is for).
pub fn table_name(
    env: &dyn Env,
    setting: &'static str,
    purpose: &str,
) -> Result<String, ConfigError> {
    let name = env
        .get(setting)?
        .ok_or_else(|| ConfigError::new(setting, "", format!("is required: {purpose}")))?;
    let valid = (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !valid {
        return Err(ConfigError::new(
            setting,
            &name,
            "must be 3 to 255 characters of A-Z a-z 0-9 _ - .",
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_parsing_names_the_setting() {
        assert_eq!(parse_in_range("X", " 7 ", 1..=10), Ok(7));
        for bad in ["0", "11", "-1", "abc", "", "1.5", "99999999999999999999999"] {
            let err = parse_in_range("X", bad, 1..=10).unwrap_err();
            assert_eq!(err.setting, "X");
            assert!(err.to_string().starts_with("invalid X="), "{err}");
        }
    }

    #[test]
    fn optional_numbers_default_when_unset() {
        assert_eq!(number_or(&[], "N", 5, 1..=9), Ok(5));
        assert_eq!(number_or(&[("N", "7")], "N", 5, 1..=9), Ok(7));
        assert_eq!(
            number_or(&[("N", "0")], "N", 5, 1..=9).unwrap_err().setting,
            "N"
        );
    }

    #[test]
    fn long_values_are_shortened_in_errors() {
        let err = ConfigError::new("X", "a".repeat(1000), "bad");
        assert_eq!(err.value.len(), 64);
    }
}
