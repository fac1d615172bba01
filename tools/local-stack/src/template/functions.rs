//! Each `AWS::Serverless::Function` with its settings: `Globals` applied,
//! memory, timeout, environment (with the variables Lambda derives from
//! `LoggingConfig`), reserved concurrency, Lambda Managed Instances, and what
//! Lambda does with its asynchronous events.

use super::{Template, decimal, number, text};
use crate::managed_instances::ManagedInstances;
use serde_norway::Value;

/// One `AWS::Serverless::Function`, with `Globals` applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Logical id, e.g. `OrderProcessorFunction`.
    pub logical_id: String,
    /// `Metadata.BuildProperties.Binary`: the cargo binary.
    pub binary: String,
    /// `MemorySize` in MB (Lambda's default, 128, if absent).
    pub memory_mb: u32,
    /// `Timeout` in seconds (Lambda's default, 3, if absent).
    pub timeout_s: u32,
    /// The variables Lambda derives from `LoggingConfig`, then
    /// `Environment.Variables`, with `!Ref X` resolved to `X`.
    pub env: Vec<(String, String)>,
    /// `ReservedConcurrentExecutions`: most invocations at once, throttled past it.
    pub reserved_concurrency: Option<u32>,
}

impl Template {
    /// Every serverless function, `Globals.Function` applied, each checked
    /// as Lambda checks it (its Lambda Managed Instances settings too: see
    /// [`Template::functions_with_capacity`]).
    pub fn functions(&self) -> Result<Vec<Function>, String> {
        Ok(self
            .functions_with_capacity()?
            .into_iter()
            .map(|(function, _)| function)
            .collect())
    }

    /// Every serverless function with where it runs: on Lambda Managed
    /// Instances (its `CapacityProviderConfig`, checked with its `MemorySize`
    /// as Lambda checks them), or on demand (`None`). A property given by
    /// `!If` is the branch its condition picks; `!Ref AWS::NoValue` leaves it
    /// out (Lambda's default, not the `Globals` value: SAM merges `Globals`
    /// before CloudFormation resolves conditions).
    pub fn functions_with_capacity(
        &self,
    ) -> Result<Vec<(Function, Option<ManagedInstances>)>, String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        self.resources("AWS::Serverless::Function")
            .into_iter()
            .map(|(logical_id, resource)| self.read_function(logical_id, resource, globals))
            .collect()
    }

    /// The Lambda Managed Instances settings of `function` (`None`: it runs
    /// on demand), as [`Template::functions_with_capacity`] reads them.
    pub fn managed_instances(
        &self,
        function: &Function,
    ) -> Result<Option<ManagedInstances>, String> {
        self.functions_with_capacity()?
            .into_iter()
            .find(|(f, _)| f.logical_id == function.logical_id)
            .map(|(_, managed)| managed)
            .ok_or_else(|| format!("template.yaml has no function {}", function.logical_id))
    }

    /// The function `logical_id` (`resource`), with `globals` applied.
    fn read_function(
        &self,
        logical_id: String,
        resource: &Value,
        globals: Option<&Value>,
    ) -> Result<(Function, Option<ManagedInstances>), String> {
        let props = resource.get("Properties");
        // The function's own property wins over `Globals`, even when it
        // resolves to `AWS::NoValue` (then it is left out).
        let prop = |name: &str| -> Result<Option<Value>, String> {
            match props
                .and_then(|p| p.get(name))
                .or_else(|| globals.and_then(|g| g.get(name)))
            {
                None => Ok(None),
                Some(v) => self
                    .resolve(v)
                    .map_err(|e| format!("{logical_id}.{name}: {e}")),
            }
        };
        let whole = |name: &str, default: u32| -> Result<u32, String> {
            match prop(name)? {
                None => Ok(default),
                Some(v) => {
                    number(&v).ok_or_else(|| format!("{logical_id}.{name} is not a number: {v:?}"))
                }
            }
        };
        let binary = resource
            .get("Metadata")
            .and_then(|m| m.get("BuildProperties"))
            .and_then(|b| b.get("Binary"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{logical_id}: no Metadata.BuildProperties.Binary"))?
            .to_owned();
        let mut env = Vec::new();
        // Lambda turns `LoggingConfig` into these variables.
        for (key, variable) in [
            ("LogFormat", "AWS_LAMBDA_LOG_FORMAT"),
            ("ApplicationLogLevel", "AWS_LAMBDA_LOG_LEVEL"),
        ] {
            // SAM merges maps from `Globals` key by key.
            if let Some(value) = logging_setting(props, key)
                .or_else(|| logging_setting(globals, key))
                .and_then(|v| self.scalar(v))
            {
                env.push((variable.to_owned(), value));
            }
        }
        for scope in [globals, props] {
            for (key, value) in self.variables(&logical_id, scope)? {
                env.retain(|(k, _)| *k != key);
                env.push((key, value));
            }
        }
        let memory_mb = whole("MemorySize", 128)?;
        let managed_instances = match prop("CapacityProviderConfig")? {
            None => None,
            Some(config) => Some(self.capacity_provider_config(&logical_id, &config, memory_mb)?),
        };
        let function = Function {
            memory_mb,
            timeout_s: whole("Timeout", 3)?,
            reserved_concurrency: prop("ReservedConcurrentExecutions")?
                .map(|v| {
                    number(&v).ok_or_else(|| {
                        format!("{logical_id}: ReservedConcurrentExecutions is not a whole number")
                    })
                })
                .transpose()?,
            logical_id,
            binary,
            env,
        };
        Ok((function, managed_instances))
    }

    /// `Environment.Variables` of `scope` (a function's properties or
    /// `Globals.Function`), resolved; a variable whose value is
    /// `!Ref AWS::NoValue` is left out, as CloudFormation leaves it out.
    fn variables(
        &self,
        logical_id: &str,
        scope: Option<&Value>,
    ) -> Result<Vec<(String, String)>, String> {
        let resolved = |value: Option<&Value>, what: &str| -> Result<Option<Value>, String> {
            value.map_or(Ok(None), |v| {
                self.resolve(v)
                    .map_err(|e| format!("{logical_id}.{what}: {e}"))
            })
        };
        let environment = resolved(scope.and_then(|s| s.get("Environment")), "Environment")?;
        let variables = resolved(
            environment.as_ref().and_then(|e| e.get("Variables")),
            "Environment.Variables",
        )?;
        let mut found = Vec::new();
        for (key, value) in variables.iter().filter_map(Value::as_mapping).flatten() {
            let key = key.as_str().ok_or("environment key is not a string")?;
            let unresolvable =
                || format!("{logical_id}: {key} has a value the local runner cannot resolve");
            let resolved = self
                .resolve(value)
                .map_err(|e| format!("{}: {e}", unresolvable()))?;
            match resolved {
                None => {}
                Some(value) => found.push((key.to_owned(), text(&value).ok_or_else(unresolvable)?)),
            }
        }
        Ok(found)
    }

    /// A function's resolved `CapacityProviderConfig` (SAM's form: `Arn`,
    /// `ExecutionEnvironmentMemoryGiBPerVCpu`,
    /// `PerExecutionEnvironmentMaxConcurrency`), checked with its `memory_mb`.
    fn capacity_provider_config(
        &self,
        logical_id: &str,
        config: &Value,
        memory_mb: u32,
    ) -> Result<ManagedInstances, String> {
        let field = |key: &str| -> Result<Option<Value>, String> {
            config.get(key).map_or(Ok(None), |v| {
                self.resolve(v)
                    .map_err(|e| format!("{logical_id}.CapacityProviderConfig.{key}: {e}"))
            })
        };
        let decimal = |key: &str| -> Result<Option<f64>, String> {
            field(key)?
                .map(|v| {
                    decimal(&v).ok_or_else(|| {
                        format!("{logical_id}.CapacityProviderConfig.{key} is not a number: {v:?}")
                    })
                })
                .transpose()
        };
        if field("Arn")?.as_ref().and_then(text).is_none() {
            return Err(format!(
                "Lambda refuses {logical_id}: CapacityProviderConfig has no Arn"
            ));
        }
        ManagedInstances::checked(
            logical_id,
            decimal("ExecutionEnvironmentMemoryGiBPerVCpu")?,
            decimal("PerExecutionEnvironmentMaxConcurrency")?,
            memory_mb,
        )
    }

    /// The function whose binary is `binary`.
    pub fn function(&self, binary: &str) -> Result<Function, String> {
        self.functions()?
            .into_iter()
            .find(|f| f.binary == binary)
            .ok_or_else(|| format!("template.yaml has no function with Binary: {binary}"))
    }

    /// What Lambda does with `function`'s asynchronous events: its
    /// `EventInvokeConfig.MaximumRetryAttempts` (2 if absent) and the logical
    /// id of its `DeadLetterQueue`, if any (`Globals` applied).
    pub fn event_invoke(&self, function: &Function) -> Result<(u32, Option<String>), String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        let props = self
            .resources("AWS::Serverless::Function")
            .into_iter()
            .find(|(id, _)| *id == function.logical_id)
            .and_then(|(_, r)| r.get("Properties"));
        let prop = |name: &str| {
            props
                .and_then(|p| p.get(name))
                .or_else(|| globals.and_then(|g| g.get(name)))
        };
        let id = &function.logical_id;
        Ok((
            self.lambda_retries(id, prop("EventInvokeConfig"))?,
            self.dead_letter_queue(id, prop("DeadLetterQueue"))?,
        ))
    }

    /// `EventInvokeConfig.MaximumRetryAttempts` of the function `id` (`config`
    /// its `EventInvokeConfig`): 0, 1 or 2, Lambda's default (2) if absent.
    pub(super) fn lambda_retries(&self, id: &str, config: Option<&Value>) -> Result<u32, String> {
        match config.and_then(|c| c.get("MaximumRetryAttempts")) {
            None => Ok(2),
            Some(v) => self
                .resolve(v)?
                .as_ref()
                .and_then(number)
                .filter(|n| *n <= 2)
                .ok_or_else(|| {
                    format!("{id}.EventInvokeConfig.MaximumRetryAttempts is not 0, 1 or 2: {v:?}")
                }),
        }
    }

    /// The `TargetArn` of the function `id`'s `DeadLetterQueue` (`dlq`), which
    /// must be of `Type: SQS`; `None` without one.
    pub(super) fn dead_letter_queue(
        &self,
        id: &str,
        dlq: Option<&Value>,
    ) -> Result<Option<String>, String> {
        let Some(dlq) = dlq else {
            return Ok(None);
        };
        let kind = dlq.get("Type").and_then(|t| self.scalar(t));
        if kind.as_deref() != Some("SQS") {
            return Err(format!(
                "{id}.DeadLetterQueue: the local stack runs only Type: SQS, not {kind:?}"
            ));
        }
        let target = dlq
            .get("TargetArn")
            .and_then(|t| self.scalar(t))
            .ok_or_else(|| format!("{id}.DeadLetterQueue has no TargetArn"))?;
        Ok(Some(target))
    }
}

/// `LoggingConfig.<key>` of a function's properties or of `Globals.Function`.
fn logging_setting<'a>(scope: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    scope
        .and_then(|s| s.get("LoggingConfig"))
        .and_then(|c| c.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_instances::{LOCAL_PARAMETERS, SUBNETS_PARAMETER};

    #[test]
    fn reads_the_projects_template() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let functions = template.functions().expect("functions");
        let mut binaries: Vec<_> = functions.iter().map(|f| f.binary.clone()).collect();
        binaries.sort();
        // One per crate under functions/ (in a user's project, also the
        // functions `cargo xtask new-function` added); its README is none.
        let crates =
            std::fs::read_dir(crate::workspace_root().join("functions")).expect("functions/");
        let mut crates: Vec<String> = crates
            .map(|entry| entry.expect("functions/").path())
            .filter(|path| path.join("Cargo.toml").is_file())
            .map(|path| {
                path.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        crates.sort();
        assert_eq!(binaries, crates);
        for f in &functions {
            assert!((128..=10_240).contains(&f.memory_mb), "{f:?}");
            assert!(f.env.iter().any(|(k, _)| k == "MEMORY_RETURN"), "{f:?}");
            let format = f.env.iter().find(|(k, _)| k == "AWS_LAMBDA_LOG_FORMAT");
            assert_eq!(format.map(|(_, v)| v.as_str()), Some("JSON"), "{f:?}");
        }
    }

    #[test]
    fn globals_refs_and_defaults() {
        let template = Template::parse(
            r#"
Parameters:
  Size: { Type: Number, Default: 42 }
Globals:
  Function:
    Timeout: 9
    Environment: { Variables: { A: global, B: global } }
Resources:
  Table: { Type: AWS::DynamoDB::Table }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      Environment:
        Variables:
          B: local
          TABLE: !Ref Table
          N: 5
          SIZE: !Ref Size
"#,
        )
        .expect("parse");
        let f = template.function("fn-bin").expect("function");
        assert_eq!((f.memory_mb, f.timeout_s), (128, 9));
        let env: Vec<_> = f.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            env,
            ["A=global", "B=local", "TABLE=Table", "N=5", "SIZE=42"]
        );
        assert!(template.function("other").is_err());
    }

    /// The template's contract for Lambda Managed Instances: subnets given
    /// switch every function to its capacity provider and 2,048 MB.
    const MANAGED: &str = r#"
Parameters:
  ManagedInstancesSubnetIds: { Type: CommaDelimitedList, Default: "" }
  Ratio: { Type: Number, Default: 2 }
  Concurrency: { Type: Number, Default: 4 }
  Memory: { Type: Number, Default: 2048 }
Conditions:
  OnManagedInstances: !Not [!Equals [!Join [",", !Ref ManagedInstancesSubnetIds], ""]]
Globals:
  Function:
    Timeout: 9
    MemorySize: 512
Resources:
  Provider: { Type: AWS::Serverless::CapacityProvider }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      MemorySize: !If [OnManagedInstances, !Ref Memory, 1769]
      Timeout: !If [OnManagedInstances, 30, !Ref AWS::NoValue]
      CapacityProviderConfig: !If
        - OnManagedInstances
        - Arn: !GetAtt Provider.Arn
          ExecutionEnvironmentMemoryGiBPerVCpu: !Ref Ratio
          PerExecutionEnvironmentMaxConcurrency: !Ref Concurrency
        - !Ref AWS::NoValue
      Environment:
        Variables:
          ALWAYS: "1"
          ONLY_ON_LMI: !If [OnManagedInstances, "yes", !Ref AWS::NoValue]
  Plain:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: plain } }
    Properties:
      Fn::If: [OnManagedInstances, {}, {}]
"#;

    #[test]
    fn conditions_pick_function_properties_and_the_capacity_provider() {
        let template = Template::parse(MANAGED).expect("parse");
        let on_demand = template.functions_with_capacity().expect("on demand");
        let (f, managed) = &on_demand[0];
        // NoValue leaves Timeout out: Lambda's default, not the Globals' 9.
        assert_eq!((f.memory_mb, f.timeout_s, *managed), (1_769, 3, None));
        assert_eq!(f.env, [("ALWAYS".to_owned(), "1".to_owned())]);
        assert_eq!(on_demand[1].0.memory_mb, 512, "Globals apply");
        let lmi = template
            .clone()
            .with_parameters(&[("ManagedInstancesSubnetIds", "subnet-00000000000000000")])
            .expect("allowed");
        let f = lmi.function("fn-bin").expect("function");
        assert_eq!((f.memory_mb, f.timeout_s), (2_048, 30));
        assert_eq!(f.env.len(), 2, "{:?}", f.env);
        assert_eq!(
            lmi.managed_instances(&f),
            Ok(Some(ManagedInstances {
                max_concurrency: 4,
                memory_gib_per_vcpu: 2
            }))
        );
        assert_eq!(
            lmi.managed_instances(&lmi.function("plain").expect("plain")),
            Ok(None)
        );
    }

    /// With the local parameters (`cargo xtask run --managed-instances`),
    /// every function of `template` that declares a `CapacityProviderConfig`
    /// runs on Lambda Managed Instances with at least one vCPU (a function
    /// that declares none runs on demand); by default every function runs on
    /// demand. The functions that declare one, by logical id.
    fn local_parameters_put_the_declaring_functions_on_managed_instances(
        template: Template,
    ) -> Vec<String> {
        let on_demand = template.functions_with_capacity().expect("on demand");
        assert!(on_demand.iter().all(|(_, managed)| managed.is_none()));
        let lmi = template
            .with_parameters(&LOCAL_PARAMETERS)
            .expect("the local parameters are allowed");
        assert_eq!(lmi.check_rules(), Ok(()));
        let declaring: Vec<String> = lmi
            .resources("AWS::Serverless::Function")
            .into_iter()
            .filter(|(_, f)| {
                f.get("Properties")
                    .and_then(|p| p.get("CapacityProviderConfig"))
                    .is_some()
            })
            .map(|(id, _)| id)
            .collect();
        let on_lmi = lmi.functions_with_capacity().expect("checked");
        for (function, managed) in on_lmi {
            if !declaring.contains(&function.logical_id) {
                assert_eq!(managed, None, "{}", function.logical_id);
                continue;
            }
            let managed = managed.unwrap_or_else(|| panic!("{} on demand", function.logical_id));
            assert!(
                managed.vcpus(function.memory_mb) >= 1.0,
                "{}: {managed} at {} MB",
                function.logical_id,
                function.memory_mb
            );
        }
        declaring
    }

    #[test]
    fn the_local_parameters_put_a_function_on_its_capacity_provider() {
        let template = crate::fixtures::template();
        let declaring =
            local_parameters_put_the_declaring_functions_on_managed_instances(template.clone());
        assert_eq!(declaring, ["FixtureFunction"]);
        let on_demand = template.function("fixture-function").expect("on demand");
        assert_eq!(on_demand.memory_mb, 256);
        let lmi = template
            .with_parameters(&LOCAL_PARAMETERS)
            .expect("allowed");
        let function = lmi
            .function("fixture-function")
            .expect("the fixture function");
        assert_eq!(function.memory_mb, 2_048);
        assert_eq!(
            lmi.managed_instances(&function),
            Ok(Some(ManagedInstances {
                max_concurrency: 8,
                memory_gib_per_vcpu: 2
            }))
        );
    }

    #[test]
    fn the_projects_functions_run_on_managed_instances_with_the_local_parameters() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        if template
            .parameters()
            .expect("parameters")
            .iter()
            .all(|p| p.name != SUBNETS_PARAMETER)
        {
            eprintln!("skipped: template.yaml has no Lambda Managed Instances parameters yet");
            return;
        }
        // Whichever functions the project has: a function a user added
        // (`cargo xtask new-function`) runs on demand unless it declares one.
        local_parameters_put_the_declaring_functions_on_managed_instances(template);
    }

    #[test]
    fn managed_instances_settings_lambda_refuses_are_errors() {
        let lmi = |values: &[(&str, &str)]| {
            let mut all = vec![("ManagedInstancesSubnetIds", "subnet-00000000000000000")];
            all.extend_from_slice(values);
            Template::parse(MANAGED)
                .expect("parse")
                .with_parameters(&all)
                .expect("no declared limits")
                .functions()
        };
        assert!(lmi(&[]).is_ok());
        for (values, refused) in [
            (
                &[("Ratio", "3")][..],
                "ExecutionEnvironmentMemoryGiBPerVCpu is 3",
            ),
            (
                &[("Concurrency", "0")][..],
                "PerExecutionEnvironmentMaxConcurrency is 0",
            ),
            (
                &[("Concurrency", "1601")][..],
                "PerExecutionEnvironmentMaxConcurrency is 1601",
            ),
            (&[("Memory", "1024")][..], "MemorySize is 1024 MB"),
        ] {
            let error = lmi(values).expect_err("Lambda refuses it");
            assert!(error.starts_with("Lambda refuses Fn: "), "{error}");
            assert!(error.contains(refused), "{values:?}: {error}");
        }
        let no_arn = Template::parse(
            "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Metadata: { BuildProperties: { Binary: b } }\n    Properties:\n      MemorySize: 2048\n      CapacityProviderConfig: { PerExecutionEnvironmentMaxConcurrency: 2 }\n",
        )
        .expect("parse");
        assert!(no_arn.functions().unwrap_err().contains("has no Arn"));
    }

    #[test]
    fn unresolvable_values_are_errors() {
        let template = Template::parse(
            "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Metadata: { BuildProperties: { Binary: b } }\n    Properties:\n      MemorySize: lots\n",
        )
        .expect("parse");
        assert!(template.functions().unwrap_err().contains("MemorySize"));
    }
}
