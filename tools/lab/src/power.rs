//! Power tuning: what each Lambda memory size costs and how long a fixed
//! workload takes there, from durations measured under the CPU quota and memory
//! limit of that size (`tuning` measures them).
//!
//! Where the size's CPU share exceeds this machine's cores, the quota is capped
//! at the cores and the measurement only says what the cap gives; there, and
//! only there, a model extrapolates: `duration = fixed + cpu / vCPUs`, fitted
//! by least squares to the sizes of whole vCPUs measured uncapped (1,769 MB,
//! 3,538 MB, ...): the work that more vCPUs speed up, and the rest, such as
//! waiting for DynamoDB, that they do not. Fractional shares are left out of
//! the fit: there the workers (the share rounded up) share less than their
//! count of vCPUs.

use shared::vcpus::MB_PER_VCPU;

/// Lambda price per GB-second, x86_64 (AWS published price, us-east-1, first tier).
pub const X86_64_GB_SECOND: f64 = 0.000_016_666_7;
/// Lambda price per GB-second, arm64 (us-east-1, first tier).
pub const ARM64_GB_SECOND: f64 = 0.000_013_333_4;
/// Lambda price per million requests.
pub const PER_MILLION_REQUESTS: f64 = 0.20;
/// Lambda Managed Instances: the management fee on top of the EC2 on-demand
/// instance price (15%; the request charge is [`PER_MILLION_REQUESTS`] as on
/// demand), from aws.amazon.com/lambda/pricing as read on [`MANAGED_PRICES_READ`].
pub const MANAGED_FEE: f64 = 0.15;
/// When the Managed Instances prices here were read.
pub const MANAGED_PRICES_READ: &str = "2026-09-20";
/// An EC2 instance Lambda Managed Instances may run an environment on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Instance {
    pub name: &'static str,
    /// GiB of memory per vCPU: the `ExecutionEnvironmentMemoryGiBPerVCpu` it serves.
    pub memory_gib_per_vcpu: u32,
    pub vcpus: u32,
    /// EC2 on-demand dollars per hour (us-east-1, Linux, x86_64).
    pub per_hour: f64,
}
/// The current-generation x86_64 instance of each memory per vCPU (compute,
/// general purpose, memory optimised), on-demand in us-east-1.
pub const INSTANCES: [Instance; 3] = [
    Instance {
        name: "c7i.xlarge",
        memory_gib_per_vcpu: 2,
        vcpus: 4,
        per_hour: 0.1785,
    },
    Instance {
        name: "m7i.xlarge",
        memory_gib_per_vcpu: 4,
        vcpus: 4,
        per_hour: 0.2016,
    },
    Instance {
        name: "r7i.xlarge",
        memory_gib_per_vcpu: 8,
        vcpus: 4,
        per_hour: 0.2646,
    },
];

/// Dollars per million requests on Lambda Managed Instances for an
/// environment of `vcpus` on `instance` serving `per_second` requests
/// without a pause: its share of the instance and the fee, plus the request
/// charge. (Lambda keeps at least three instances: less traffic costs more.)
pub fn managed_cost_per_million(instance: &Instance, vcpus: f64, per_second: f64) -> f64 {
    let per_hour = instance.per_hour / f64::from(instance.vcpus) * vcpus * (1.0 + MANAGED_FEE);
    1e6 * per_hour / 3600.0 / per_second.max(f64::EPSILON) + PER_MILLION_REQUESTS
}

/// The memory sizes tried: the range the 1,769 MB rule covers (Lambda's up to
/// 10,240 MB; above, only Managed Instances, priced and sized otherwise), with
/// the whole-vCPU steps.
pub const MEMORY_SIZES_MB: [u64; 16] = [
    128, 256, 512, 1024, 1536, 1769, 2048, 3008, 3538, 4096, 5307, 6144, 7076, 8192, 8845, 10240,
];

/// vCPUs' worth of CPU time Lambda gives `mb` (one per [`MB_PER_VCPU`];
/// Lambda's cap of 6 lies above 10,240 MB).
pub fn lambda_vcpus(mb: u64) -> f64 {
    mb as f64 / MB_PER_VCPU as f64
}

/// Dollars per million invocations of `ms` at `mb` (duration billed in
/// whole milliseconds, rounded up), plus the request charge.
pub fn cost_per_million(ms: f64, mb: u64, gb_second: f64) -> f64 {
    let billed_s = ms.ceil() / 1e3;
    1e6 * billed_s * (mb as f64 / 1024.0) * gb_second + PER_MILLION_REQUESTS
}

/// What one memory size gave under its quota and limit.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Measured(Measured),
    /// The function failed at this size (e.g. `Runtime.OutOfMemory`): the
    /// error type and a short reason.
    Failed(String),
}

/// A size the function answered at.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The steady invocations' durations as the emulator reported them, ms.
    pub all_ms: Vec<f64>,
    /// The CPU share the function detected (`cpu_share` of its init line).
    pub detected_vcpus: f64,
    /// The workers it chose.
    pub workers: u64,
}

/// One memory size as measured here.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub mb: u64,
    /// Whether this machine's cores, not the size, set the quota.
    pub capped: bool,
    pub outcome: Outcome,
}

/// Where a row's Lambda duration comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Measured under this size's own CPU share.
    Measured,
    /// Extrapolated by the [`Model`]: the share exceeds this machine's cores.
    Modelled,
}

/// One memory size in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub point: Point,
    /// vCPUs Lambda gives the size.
    pub lambda_vcpus: f64,
    /// Median of the steady durations measured here, ms.
    pub measured_ms: Option<f64>,
    /// The duration on Lambda, ms, and where it comes from (`None`: failed,
    /// or capped with no model).
    pub lambda_ms: Option<(f64, Source)>,
    /// Dollars per million invocations at `lambda_ms`, x86_64 and arm64 (at
    /// the same duration).
    pub cost: Option<(f64, f64)>,
}

/// `duration = fixed_ms + cpu_ms / vCPUs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    pub fixed_ms: f64,
    pub cpu_ms: f64,
}

impl Model {
    /// Least squares over `(vCPUs, ms)`; both terms kept non-negative. `None`
    /// with fewer than two distinct shares.
    pub fn fit(points: &[(f64, f64)]) -> Option<Self> {
        let xs: Vec<(f64, f64)> = points
            .iter()
            .filter(|(v, ms)| *v > 0.0 && v.is_finite() && ms.is_finite())
            .map(|&(v, ms)| (1.0 / v, ms))
            .collect();
        if xs.len() < 2 {
            return None;
        }
        let n = xs.len() as f64;
        let mean_x = xs.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = xs.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = xs.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        if sxx <= f64::EPSILON {
            return None;
        }
        let sxy: f64 = xs.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope = sxy / sxx;
        let model = if slope < 0.0 {
            // More CPU did not help: a flat line.
            Self {
                fixed_ms: mean_y,
                cpu_ms: 0.0,
            }
        } else if mean_y - slope * mean_x < 0.0 {
            // Nothing fixed: through the origin.
            let sx2: f64 = xs.iter().map(|p| p.0 * p.0).sum();
            let sxy0: f64 = xs.iter().map(|p| p.0 * p.1).sum();
            Self {
                fixed_ms: 0.0,
                cpu_ms: sxy0 / sx2,
            }
        } else {
            Self {
                fixed_ms: mean_y - slope * mean_x,
                cpu_ms: slope,
            }
        };
        Some(model)
    }

    /// Modelled duration at `vcpus`, ms.
    pub fn ms(&self, vcpus: f64) -> f64 {
        self.fixed_ms + self.cpu_ms / vcpus
    }
}

/// The report's rows for `points` (measured in size order), and the model
/// fitted for the capped sizes (`None` if nothing is capped or too little was
/// measured to fit).
pub fn rows(points: &[Point]) -> (Vec<Row>, Option<Model>) {
    let median_of = |p: &Point| match &p.outcome {
        Outcome::Measured(m) => Some(lab_probes::stats::median(m.all_ms.clone())),
        Outcome::Failed(_) => None,
    };
    let fitted: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| !p.capped && p.mb % MB_PER_VCPU == 0)
        .filter_map(|p| Some((lambda_vcpus(p.mb), median_of(p)?)))
        .collect();
    let model = points
        .iter()
        .any(|p| p.capped)
        .then(|| Model::fit(&fitted))
        .flatten();
    let rows = points
        .iter()
        .map(|point| {
            let vcpus = lambda_vcpus(point.mb);
            let measured_ms = median_of(point);
            let lambda_ms = match (measured_ms, point.capped, model) {
                (None, ..) => None,
                (Some(ms), false, _) => Some((ms, Source::Measured)),
                (Some(_), true, Some(model)) => Some((model.ms(vcpus), Source::Modelled)),
                (Some(_), true, None) => None,
            };
            let cost = lambda_ms.map(|(ms, _)| {
                (
                    cost_per_million(ms, point.mb, X86_64_GB_SECOND),
                    cost_per_million(ms, point.mb, ARM64_GB_SECOND),
                )
            });
            Row {
                point: point.clone(),
                lambda_vcpus: vcpus,
                measured_ms,
                lambda_ms,
                cost,
            }
        })
        .collect();
    (rows, model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(mb: u64, capped: bool, ms: f64) -> Point {
        Point {
            mb,
            capped,
            outcome: Outcome::Measured(Measured {
                all_ms: vec![ms * 1.1, ms, ms * 0.9],
                detected_vcpus: lambda_vcpus(mb).min(2.0),
                workers: 1,
            }),
        }
    }

    #[test]
    fn cost_bills_whole_milliseconds_and_requests() {
        // 1 s at 1024 MB = 1 GB-s; a million of them plus the requests.
        let cost = cost_per_million(1_000.0, 1024, X86_64_GB_SECOND);
        assert!((cost - (16.6667 + 0.20)).abs() < 1e-6, "{cost}");
        // 1.2 ms is billed as 2 ms.
        let rounded = cost_per_million(1.2, 1024, X86_64_GB_SECOND);
        assert!((rounded - (1e6 * 0.002 * X86_64_GB_SECOND + 0.20)).abs() < 1e-9);
    }

    #[test]
    fn the_model_is_used_only_where_the_quota_is_capped() {
        // 2 cores: CPU-bound work of 2,000 ms on one vCPU, plus 100 ms of waiting.
        let work = |mb: u64| 100.0 + 2_000.0 / lambda_vcpus(mb).min(2.0);
        // 2,048 MB off the curve: a fractional share (here, one worker on
        // 1.16 vCPUs) is reported, not fitted.
        let points: Vec<Point> = [512, 1769, 2048, 3538, 7076]
            .into_iter()
            .map(|mb| {
                point(
                    mb,
                    mb > 3538,
                    work(mb) + if mb == 2048 { 500.0 } else { 0.0 },
                )
            })
            .collect();
        let (rows, model) = rows(&points);
        let model = model.expect("fitted");
        assert!((model.fixed_ms - 100.0).abs() < 1e-6, "{model:?}");
        assert!((model.cpu_ms - 2_000.0).abs() < 1e-6, "{model:?}");
        for row in &rows[..4] {
            let (ms, source) = row.lambda_ms.expect("measured");
            assert_eq!(source, Source::Measured, "{} MB", row.point.mb);
            assert_eq!(Some(ms), row.measured_ms);
        }
        // 7,076 MB is 4 vCPUs on Lambda, measured at 2 here.
        let capped = &rows[4];
        assert_eq!(capped.measured_ms, Some(work(7076)));
        let (ms, source) = capped.lambda_ms.expect("modelled");
        assert_eq!(source, Source::Modelled);
        assert!((ms - (100.0 + 2_000.0 / 4.0)).abs() < 1e-6, "{ms}");
        let (x86, arm) = capped.cost.expect("cost");
        assert!(arm < x86);
    }

    #[test]
    fn nothing_capped_no_model_and_failures_have_no_cost() {
        let mut points = vec![point(1769, false, 500.0), point(3538, false, 300.0)];
        points.push(Point {
            mb: 128,
            capped: false,
            outcome: Outcome::Failed("Runtime.OutOfMemory".into()),
        });
        let (rows, model) = rows(&points);
        assert_eq!(model, None);
        assert_eq!((rows[2].lambda_ms, rows[2].cost), (None, None));
    }

    #[test]
    fn the_fit_stays_physical_on_noisy_data() {
        // More vCPUs measured slower (noise): flat, never negative CPU.
        let flat = Model::fit(&[(1.0, 20.0), (2.0, 22.0)]).expect("fit");
        assert_eq!(flat.cpu_ms, 0.0);
        assert!((flat.fixed_ms - 21.0).abs() < 1e-9);
        // Better than linear speed-up: no negative fixed part.
        let origin = Model::fit(&[(1.0, 1_000.0), (2.0, 400.0)]).expect("fit");
        assert_eq!(origin.fixed_ms, 0.0);
        assert!(origin.cpu_ms > 0.0);
        assert_eq!(Model::fit(&[(1.0, 5.0)]), None);
        assert_eq!(Model::fit(&[(2.0, 5.0), (2.0, 6.0)]), None);
        assert_eq!(Model::fit(&[]), None);
    }

    #[test]
    fn managed_instances_cost_is_the_environments_share_of_the_instance_and_the_fee() {
        let c7i = INSTANCES[0];
        // One of its four vCPUs: $0.1785 / 4 x 1.15 an hour, for 100 requests a second.
        let per_hour = 0.1785 / 4.0 * 1.15;
        let expected = 1e6 * per_hour / 3600.0 / 100.0 + PER_MILLION_REQUESTS;
        assert!((managed_cost_per_million(&c7i, 1.0, 100.0) - expected).abs() < 1e-9);
        // Twice the throughput, the instance part halves; twice the vCPUs, it doubles.
        let part = |vcpus, per_second| {
            managed_cost_per_million(&c7i, vcpus, per_second) - PER_MILLION_REQUESTS
        };
        assert!((part(1.0, 200.0) * 2.0 - part(1.0, 100.0)).abs() < 1e-9);
        assert!((part(2.0, 100.0) - 2.0 * part(1.0, 100.0)).abs() < 1e-9);
        // One instance per memory per vCPU Lambda allows.
        let ratios: Vec<u32> = INSTANCES.iter().map(|i| i.memory_gib_per_vcpu).collect();
        assert_eq!(ratios, local_stack::managed_instances::MEMORY_GIB_PER_VCPU);
    }
}
