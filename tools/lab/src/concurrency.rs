//! Many requests in one environment (Lambda Managed Instances): each
//! function's real handler serving 1, 2, 4 ... requests at once in one
//! process (its `concurrency` probe, `lab_probes::concurrency`), per allocator, in a cgroup of the function's
//! Managed Instances memory and vCPUs from `template.yaml`: throughput,
//! p50/p99, RSS. Then the same handler one request at a time under its
//! on-demand share, for the cost beside it. And the property every
//! configuration must keep: RSS stays flat once a level is warm.

use crate::plan;
use crate::probes::{self, Probes};
use crate::scale::Scale;
use local_stack::cgroup::{self, Cgroup};
use local_stack::managed_instances::{LOCAL_PARAMETERS, ManagedInstances};
use local_stack::template::{Function, Template};
use local_stack::workspace_root;
use serde_json::Value;
use shared::concurrency::MAX_CONCURRENCY_VAR;

/// Most RSS a level may gain between its warm-up pass and the end of its
/// measured pass (the same requests again): this many MiB, or
/// [`GROWTH_BOUND_SHARE`] of the warm RSS if more (requests in flight peak
/// a little differently from pass to pass, and `MEMORY_RETURN=keep` holds
/// the highest peak).
pub const GROWTH_BOUND_MIB: f64 = 4.0;
/// See [`GROWTH_BOUND_MIB`].
pub const GROWTH_BOUND_SHARE: f64 = 0.05;

/// The growth bound of a level whose RSS was `warm_mib` after its warm-up.
pub fn growth_bound(warm_mib: f64) -> f64 {
    GROWTH_BOUND_MIB.max(GROWTH_BOUND_SHARE * warm_mib)
}
/// How long the probes' stores take to answer one call (a DynamoDB write, a
/// page of a scan), in ms: what lets one vCPU serve several requests at once.
pub const STORE_MS: u64 = 5;
pub use super::probes::SHIPPED;
/// The concurrencies measured (fewer in quick mode).
const LEVELS: [usize; 6] = [1, 2, 4, 8, 16, 64];

/// A function as its probe serves it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The function's `Binary` in the template (and its name in the report).
    pub binary: String,
    /// One request, for the report (as the probe says).
    pub request: String,
}

/// One concurrency as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub clients: usize,
    /// Requests answered in the measured pass (the rest were `Busy`).
    pub answered: usize,
    /// Refused as `Busy` in both passes.
    pub busy: usize,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub rss_warm_mib: f64,
    pub rss_end_mib: f64,
    pub rss_max_mib: f64,
}

impl Level {
    /// Requests answered per second.
    pub fn throughput(&self) -> f64 {
        self.answered as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// One function with one allocator.
#[derive(Debug, Clone)]
pub struct Run {
    pub allocator: &'static str,
    /// The CPU share the function detected.
    pub vcpus: f64,
    pub levels: Vec<Level>,
}

/// One function: its settings and every allocator's run.
#[derive(Debug, Clone)]
pub struct Measured {
    pub workload: Workload,
    /// Its Managed Instances memory size and settings.
    pub memory_mb: u32,
    pub managed: ManagedInstances,
    pub runs: Vec<Run>,
    /// On demand (its template memory size, one request at a time, shipped
    /// allocator): the memory size and the mean time of a request, or why not.
    pub on_demand: Result<(u32, f64), String>,
}

impl Measured {
    /// The levels of `run` one environment can meet on Lambda: at most the
    /// template's `PerExecutionEnvironmentMaxConcurrency` at once.
    pub fn reachable<'a>(&self, run: &'a Run) -> impl Iterator<Item = &'a Level> {
        let most = usize::try_from(self.managed.max_concurrency).unwrap_or(usize::MAX);
        run.levels.iter().filter(move |l| l.clients <= most)
    }
}

/// The whole section's measurements.
#[derive(Debug, Clone)]
pub struct Concurrency {
    /// Whether the probes ran under CPU and memory limits, or why not.
    pub limits: Result<(), String>,
    pub functions: Vec<Measured>,
}

/// The probe's levels at `scale`: `CLIENTS:REQUESTS` each.
fn level_args(scale: Scale) -> Vec<String> {
    let (levels, least): (&[usize], usize) = match scale {
        Scale::Full => (&LEVELS, 24),
        Scale::Quick => (&LEVELS[..4], 4),
    };
    levels
        .iter()
        .map(|&c| format!("{c}:{}", least.max(2 * c)))
        .collect()
}

/// Measure every function with every allocator in `probes`, at `scale`.
pub fn measure(probes: &Probes, scale: Scale, tick: &dyn Fn(&str)) -> Result<Concurrency, String> {
    let limits = cgroup::enforced();
    let on_demand = Template::load(&workspace_root().join("template.yaml"))?;
    let managed = on_demand.clone().with_parameters(&LOCAL_PARAMETERS)?;
    let mut functions = Vec::new();
    let (managed_functions, on_demand_functions) =
        (plan::functions(&managed)?, plan::functions(&on_demand)?);
    for function in probes.offering(&managed_functions, "concurrency") {
        // On Managed Instances only where the template can put it there.
        let Some(settings) = managed.managed_instances(function)? else {
            continue;
        };
        let mut workload = Workload {
            binary: function.binary.clone(),
            request: String::new(),
        };
        let mut runs = Vec::new();
        for allocator in probes.allocators() {
            tick(&format!(
                "many at once: {} with {allocator}",
                workload.binary
            ));
            let cgroup = limits
                .is_ok()
                .then(|| Cgroup::create_on(function.memory_mb, Some(settings)));
            let cgroup = cgroup.transpose()?;
            let extra = [(MAX_CONCURRENCY_VAR, settings.max_concurrency.to_string())];
            let json = probe(
                probes,
                cgroup.as_ref(),
                allocator,
                function,
                &extra,
                Plan::Scaling(scale),
            )?;
            workload.request = json["request"].as_str().unwrap_or_default().to_owned();
            runs.push(parse_run(allocator, &json)?);
        }
        tick(&format!("one at a time on demand: {}", workload.binary));
        let function_on_demand = on_demand_functions
            .iter()
            .find(|f| f.binary == function.binary)
            .ok_or_else(|| format!("{} is not in the template", function.binary))?;
        functions.push(Measured {
            on_demand: one_at_a_time(probes, &limits, function_on_demand, scale),
            workload,
            memory_mb: function.memory_mb,
            managed: settings,
            runs,
        });
    }
    Ok(Concurrency { limits, functions })
}

/// `workload` one request at a time under its on-demand share: the memory
/// size and the mean time of a request.
fn one_at_a_time(
    probes: &Probes,
    limits: &Result<(), String>,
    function: &Function,
    scale: Scale,
) -> Result<(u32, f64), String> {
    limits.clone()?;
    let cgroup = Cgroup::create_on(function.memory_mb, None)?;
    let requests = match scale {
        Scale::Full => 24,
        Scale::Quick => 4,
    };
    let allocator = probes
        .allocators()
        .find(|a| *a == SHIPPED)
        .or_else(|| probes.allocators().next())
        .ok_or("no probes built")?;
    let json = probe(
        probes,
        Some(&cgroup),
        allocator,
        function,
        &[],
        Plan::OneAtATime(requests, scale),
    )?;
    let run = parse_run(allocator, &json)?;
    let level = run.levels.first().ok_or("no level measured")?;
    Ok((
        function.memory_mb,
        level.seconds * 1e3 / level.answered.max(1) as f64,
    ))
}

/// What a probe run measures.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Every level at `Scale`, after filling what the handler keeps.
    Scaling(Scale),
    /// This many requests one at a time, sized for `Scale`.
    OneAtATime(usize, Scale),
}

/// Run `function`'s probe as `plan` says, with its settings and `extra`
/// ones, in `cgroup`.
fn probe(
    probes: &Probes,
    cgroup: Option<&Cgroup>,
    allocator: &str,
    function: &Function,
    extra: &[(&'static str, String)],
    plan: Plan,
) -> Result<Value, String> {
    let memory = function.memory_mb.to_string();
    let store_ms = STORE_MS.to_string();
    let mut env = plan::settings(
        function,
        &[
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.as_str()),
            ("STORE_MS", store_ms.as_str()),
        ],
    );
    env.extend(extra.iter().map(|(k, v)| (*k, v.as_str())));
    let (warm_up, levels, scale) = match plan {
        // RSS is compared once what the handler keeps is full.
        Plan::Scaling(scale) => ("fill".to_owned(), level_args(scale), scale),
        Plan::OneAtATime(requests, scale) => ("2".to_owned(), vec![format!("1:{requests}")], scale),
    };
    env.push((
        lab_probes::concurrency::SCALE,
        match scale {
            Scale::Full => "full",
            Scale::Quick => "quick",
        },
    ));
    let mut args = vec![warm_up];
    args.extend(levels);
    let name = probes::of(&function.binary, "concurrency");
    probes.run_in(cgroup, allocator, &name, &args, &env)
}

/// The probe's JSON line for `allocator`.
fn parse_run(allocator: &'static str, json: &Value) -> Result<Run, String> {
    let number = |v: &Value, key: &str| {
        v[key]
            .as_f64()
            .ok_or_else(|| format!("concurrency probe: no {key} in {v}"))
    };
    let levels = json["levels"]
        .as_array()
        .ok_or_else(|| format!("concurrency probe: no levels in {json}"))?
        .iter()
        .map(|l| {
            Ok(Level {
                clients: number(l, "clients")? as usize,
                answered: number(l, "answered")? as usize,
                busy: number(l, "busy")? as usize,
                seconds: number(l, "seconds")?,
                p50_ms: number(l, "p50_ms")?,
                p99_ms: number(l, "p99_ms")?,
                rss_warm_mib: number(l, "rss_warm_mib")?,
                rss_end_mib: number(l, "rss_end_mib")?,
                rss_max_mib: number(l, "rss_max_mib")?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Run {
        allocator,
        vcpus: number(json, "vcpus")?,
        levels,
    })
}

/// Every level one environment can meet (at most the template's
/// `PerExecutionEnvironmentMaxConcurrency` at once) of every run kept its
/// RSS flat once warm.
pub fn check_flat(measured: &Concurrency) -> Result<(), String> {
    for function in &measured.functions {
        for run in &function.runs {
            for level in function.reachable(run) {
                let growth = level.rss_end_mib - level.rss_warm_mib;
                let bound = growth_bound(level.rss_warm_mib);
                if growth > bound {
                    return Err(format!(
                        "{} with {}, {} at once: RSS grew {growth:.1} MiB after warm-up (bound {bound:.1} MiB)",
                        function.workload.binary, run.allocator, level.clients
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(clients: usize, warm: f64, end: f64) -> Level {
        Level {
            clients,
            answered: 10,
            busy: 0,
            seconds: 1.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            rss_warm_mib: warm,
            rss_end_mib: end,
            rss_max_mib: end,
        }
    }

    fn measured(levels: Vec<Level>) -> Concurrency {
        let managed = ManagedInstances::checked("f", Some(2.0), Some(4.0), 2048).expect("settings");
        Concurrency {
            limits: Ok(()),
            functions: vec![Measured {
                workload: Workload {
                    binary: "order-processor".into(),
                    request: "a batch".into(),
                },
                memory_mb: 2048,
                managed,
                runs: vec![Run {
                    allocator: SHIPPED,
                    vcpus: 1.0,
                    levels,
                }],
                on_demand: Err("not measured".into()),
            }],
        }
    }

    #[test]
    fn growth_once_warm_fails_only_where_one_environment_can_be() {
        // Within the bound at every level up to the maximum (4), whatever above.
        let flat = measured(vec![
            level(1, 20.0, 21.0),
            level(4, 100.0, 104.9),
            level(64, 50.0, 90.0),
        ]);
        assert_eq!(check_flat(&flat), Ok(()));
        let grown = measured(vec![level(1, 20.0, 21.0), level(2, 20.0, 24.5)]);
        let error = check_flat(&grown).expect_err("4.5 MiB over 20 MiB");
        assert!(error.contains("2 at once"), "{error}");
        assert_eq!(growth_bound(20.0), GROWTH_BOUND_MIB);
        assert_eq!(growth_bound(200.0), 10.0);
    }
}
