//! A function's `FunctionUrlConfig`: its auth type and CORS settings, checked
//! as CloudFormation checks them (served by [`crate::function_url`]).

use super::functions::Function;
use super::{Template, number, text};
use serde_norway::Value;

/// A function's `FunctionUrlConfig`: the Function URL SAM creates for it
/// (`AWS::Lambda::Url`), served locally by [`crate::function_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionUrlConfig {
    /// `AuthType`: who may call the URL.
    pub auth_type: AuthType,
    /// `Cors`: the cross-origin settings, if any.
    pub cors: Option<Cors>,
}

/// A Function URL's `AuthType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    /// `AWS_IAM`: every request signed with SigV4 for the service `lambda`.
    AwsIam,
    /// `NONE`: anyone may call it.
    None,
}

/// A Function URL's `Cors` (CloudFormation's `AWS::Lambda::Url Cors`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// `AllowCredentials` (default false).
    pub allow_credentials: bool,
    /// `AllowHeaders`.
    pub allow_headers: Vec<String>,
    /// `AllowMethods` (`GET`, `POST`, ..., or `*`).
    pub allow_methods: Vec<String>,
    /// `AllowOrigins` (`https://www.example.com`, ..., or `*`).
    pub allow_origins: Vec<String>,
    /// `ExposeHeaders`.
    pub expose_headers: Vec<String>,
    /// `MaxAge` in seconds (0 to 86,400).
    pub max_age: Option<u32>,
}

impl Template {
    /// The `FunctionUrlConfig` of `function` (its own, else `Globals.Function`'s);
    /// `None` if it has no Function URL. Values CloudFormation would refuse
    /// (an unknown `AuthType`, `MaxAge` past 86,400, a method not in
    /// Lambda's list) are errors.
    pub fn function_url(&self, function: &Function) -> Result<Option<FunctionUrlConfig>, String> {
        let id = &function.logical_id;
        let own = self
            .doc
            .get("Resources")
            .and_then(|r| r.get(id.as_str()))
            .and_then(|r| r.get("Properties"))
            .and_then(|p| p.get("FunctionUrlConfig"));
        let global = self
            .doc
            .get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("FunctionUrlConfig"));
        let Some(config) = own.or(global) else {
            return Ok(None);
        };
        let Some(config) = self.resolve(config)? else {
            return Ok(None);
        };
        let field = |value: &Value, name: &str| -> Result<Option<Value>, String> {
            value.get(name).map_or(Ok(None), |v| self.resolve(v))
        };
        let auth_type = match field(&config, "AuthType")?
            .as_ref()
            .and_then(text)
            .as_deref()
        {
            Some("AWS_IAM") => AuthType::AwsIam,
            Some("NONE") => AuthType::None,
            Some(other) => {
                return Err(format!(
                    "{id}.FunctionUrlConfig.AuthType {other:?} is not AWS_IAM or NONE"
                ));
            }
            None => return Err(format!("{id}.FunctionUrlConfig has no AuthType")),
        };
        let cors = match field(&config, "Cors")? {
            None => None,
            Some(cors) => Some(self.cors(id, &cors)?),
        };
        Ok(Some(FunctionUrlConfig { auth_type, cors }))
    }

    /// A `FunctionUrlConfig.Cors` of function `id`, resolved and checked.
    fn cors(&self, id: &str, cors: &Value) -> Result<Cors, String> {
        let field = |name: &str| -> Result<Option<Value>, String> {
            cors.get(name).map_or(Ok(None), |v| self.resolve(v))
        };
        let list = |name: &str| -> Result<Vec<String>, String> {
            match field(name)? {
                None => Ok(Vec::new()),
                Some(Value::Sequence(items)) => items
                    .iter()
                    .filter_map(|item| self.resolve(item).transpose())
                    .map(|item| {
                        item.and_then(|v| {
                            text(&v)
                                .ok_or_else(|| format!("{id}.FunctionUrlConfig.Cors.{name}: {v:?}"))
                        })
                    })
                    .collect(),
                Some(other) => Err(format!(
                    "{id}.FunctionUrlConfig.Cors.{name} is not a list: {other:?}"
                )),
            }
        };
        let allow_credentials = match field("AllowCredentials")? {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => {
                return Err(format!(
                    "{id}.FunctionUrlConfig.Cors.AllowCredentials is not a boolean: {other:?}"
                ));
            }
        };
        let max_age = match field("MaxAge")? {
            None => None,
            Some(v) => Some(number(&v).filter(|n| *n <= 86_400).ok_or_else(|| {
                format!("{id}.FunctionUrlConfig.Cors.MaxAge is not 0 to 86400: {v:?}")
            })?),
        };
        let allow_methods = list("AllowMethods")?;
        const METHODS: [&str; 7] = ["GET", "PUT", "HEAD", "POST", "PATCH", "DELETE", "*"];
        if let Some(bad) = allow_methods
            .iter()
            .find(|m| !METHODS.contains(&m.as_str()))
        {
            return Err(format!(
                "{id}.FunctionUrlConfig.Cors.AllowMethods: {bad:?} is not one of {METHODS:?}"
            ));
        }
        Ok(Cors {
            allow_credentials,
            allow_headers: list("AllowHeaders")?,
            allow_methods,
            allow_origins: list("AllowOrigins")?,
            expose_headers: list("ExposeHeaders")?,
            max_age,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iam_url_is_read_and_a_function_without_one_has_none() {
        let template = crate::fixtures::template();
        let function = template.function("fixture-function").expect("function");
        let config = template.function_url(&function).expect("valid");
        assert_eq!(
            config,
            Some(FunctionUrlConfig {
                auth_type: AuthType::AwsIam,
                cors: None
            }),
            "the fixture function's FunctionUrlConfig"
        );
        let reporter = template.function("fixture-reporter").expect("reporter");
        assert_eq!(template.function_url(&reporter), Ok(None));
    }

    const WITH_CORS: &str = r#"
Parameters:
  Origin: { Type: String, Default: "https://app.example.com" }
Globals:
  Function:
    FunctionUrlConfig: { AuthType: NONE }
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      FunctionUrlConfig:
        AuthType: AWS_IAM
        Cors:
          AllowOrigins: [!Ref Origin, "http://localhost:3000"]
          AllowMethods: [POST, GET]
          AllowHeaders: [content-type, x-custom]
          ExposeHeaders: [x-request-id]
          MaxAge: 300
          AllowCredentials: true
  Other:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: other-bin } }
"#;

    #[test]
    fn cors_settings_and_globals_are_read() {
        let template = Template::parse(WITH_CORS).expect("parse");
        let function = template.function("fn-bin").expect("fn");
        assert_eq!(
            template.function_url(&function),
            Ok(Some(FunctionUrlConfig {
                auth_type: AuthType::AwsIam,
                cors: Some(Cors {
                    allow_credentials: true,
                    allow_headers: vec!["content-type".into(), "x-custom".into()],
                    allow_methods: vec!["POST".into(), "GET".into()],
                    allow_origins: vec![
                        "https://app.example.com".into(),
                        "http://localhost:3000".into()
                    ],
                    expose_headers: vec!["x-request-id".into()],
                    max_age: Some(300),
                }),
            }))
        );
        let other = template.function("other-bin").expect("other");
        assert_eq!(
            template.function_url(&other),
            Ok(Some(FunctionUrlConfig {
                auth_type: AuthType::None,
                cors: None
            }))
        );
    }

    #[test]
    fn what_cloudformation_refuses_is_an_error() {
        for (from, to, says) in [
            ("AuthType: AWS_IAM", "AuthType: IAM", "AuthType"),
            ("MaxAge: 300", "MaxAge: 86401", "MaxAge"),
            ("[POST, GET]", "[POST, OPTIONS]", "OPTIONS"),
            (
                "AllowCredentials: true",
                "AllowCredentials: yes please",
                "AllowCredentials",
            ),
        ] {
            let text = WITH_CORS.replace(from, to);
            assert_ne!(text, WITH_CORS, "{from}");
            let template = Template::parse(&text).expect("parse");
            let function = template.function("fn-bin").expect("fn");
            let error = template.function_url(&function).expect_err(to);
            assert!(error.contains(says), "{error}");
        }
    }
}
