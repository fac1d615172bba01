//! The cold cost of the functions' HTTPS client, per crypto provider and
//! roots: the `lab_tls` probe as a function under the emulator at the order
//! processor's memory size (its CPU share and memory limit), against DynamoDB
//! Local behind the TLS front of `first_invocation`'s stack. Fresh
//! environments, the variants interleaved;
//! only each environment's first invocation is used (a cold process).

use super::stack::logs_dir;
use local_stack::emulator::Emulator;
use local_stack::template::Template;
use local_stack::tls_front::CA_FILE_VARIABLE;
use local_stack::{local_aws, tools, workspace_root};
use std::path::Path;

/// The system's roots, as a function on Lambda loads them; the run's
/// authority is appended so that the front is trusted.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A crypto provider and the roots the client loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// `ring` (shipped) or `aws-lc` (the SDK's default).
    pub provider: &'static str,
    /// Whether the system's roots are loaded (else the run's authority only).
    pub system_roots: bool,
}

/// As shipped, the SDK's default provider, and the roots' own cost.
pub const VARIANTS: [Variant; 3] = [
    Variant {
        provider: "ring",
        system_roots: true,
    },
    Variant {
        provider: "aws-lc",
        system_roots: true,
    },
    Variant {
        provider: "ring",
        system_roots: false,
    },
];

/// One variant's cold environments.
#[derive(Debug, Clone)]
pub struct Row {
    pub variant: Variant,
    pub memory_mb: u32,
    /// Per environment: SDK configuration and client, first call, second call (ms).
    pub client_ms: Vec<f64>,
    pub first_call_ms: Vec<f64>,
    /// The CPU time of the first call, ms: what it costs at any share.
    pub first_call_cpu_ms: Vec<f64>,
    pub second_call_ms: Vec<f64>,
}

/// Measure every variant in `starts` fresh environments of `probe`, calling
/// DynamoDB at `endpoint` (a TLS front whose authority is in `ca_file`), at
/// the memory size of the template's smallest function with a table; none
/// without such a function.
pub fn measure(
    probe: &Path,
    endpoint: &str,
    ca_file: &Path,
    starts: usize,
    tick: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    // At the memory size (CPU share) of the smallest function with a table.
    let table_of = |f: &local_stack::template::Function| {
        f.env
            .iter()
            .find(|(name, _)| name == "TABLE_NAME")
            .map(|(_, table)| table.clone())
    };
    let Some(mut spec) = super::plan::smallest(&template, |f| table_of(f).is_some())? else {
        return Ok(Vec::new()); // no function names a table: nothing to call
    };
    let table = table_of(&spec).unwrap_or_default();
    spec.env.clear();
    let rie = tools::emulator()?;
    let logs = logs_dir()?;
    let bundle = logs.join("tls-system-roots-and-authority.pem");
    let mut roots = std::fs::read(SYSTEM_ROOTS).map_err(|e| format!("{SYSTEM_ROOTS}: {e}"))?;
    roots.extend(std::fs::read(ca_file).map_err(|e| format!("{}: {e}", ca_file.display()))?);
    std::fs::write(&bundle, roots).map_err(|e| format!("{}: {e}", bundle.display()))?;

    let mut rows: Vec<Row> = VARIANTS
        .iter()
        .map(|&variant| Row {
            variant,
            memory_mb: spec.memory_mb,
            client_ms: Vec::new(),
            first_call_ms: Vec::new(),
            first_call_cpu_ms: Vec::new(),
            second_call_ms: Vec::new(),
        })
        .collect();
    for round in 0..starts {
        for row in &mut rows {
            let variant = row.variant;
            tick(&format!("TLS client: {}, #{}", variant.provider, round + 1));
            let roots = if variant.system_roots {
                &bundle
            } else {
                ca_file
            };
            let roots = roots.to_string_lossy();
            let mut env = local_aws::function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", endpoint)]);
            env.extend([
                ("LAB_TLS_PROVIDER", variant.provider),
                ("TABLE_NAME", table.as_str()),
                (CA_FILE_VARIABLE, roots.as_ref()),
            ]);
            let log = logs.join(format!("tls-{}.log", variant.provider));
            let emulator = Emulator::start(&rie, probe, &spec, &env, &log)?;
            let answer = emulator.invoke("{}")?.json()?;
            emulator.stop();
            let field = |name: &str| {
                answer[name]
                    .as_f64()
                    .ok_or_else(|| format!("lab_tls answered {answer} (see {})", log.display()))
            };
            row.client_ms.push(field("client_ms")?);
            row.first_call_ms.push(field("first_call_ms")?);
            row.first_call_cpu_ms.push(field("first_call_cpu_ms")?);
            row.second_call_ms.push(field("second_call_ms")?);
        }
    }
    Ok(rows)
}
