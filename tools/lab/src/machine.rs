//! What the lab ran on: every table in `BENCHMARKS.md` names it, because
//! absolute figures only mean something next to the machine that made them.

use std::path::Path;

/// The machine and the day.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Cores this process may use (`available_parallelism`).
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// The first `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// The transparent huge page mode, e.g. `madvise` (the bracketed word of
    /// `/sys/kernel/mm/transparent_hugepage/enabled`).
    pub thp: String,
    /// Today, UTC, as `YYYY-MM-DD`.
    pub date: String,
}

impl Machine {
    /// Read it from this machine.
    pub fn here() -> Self {
        let read = |path: &str| std::fs::read_to_string(Path::new(path)).unwrap_or_default();
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: or_unknown(read("/proc/sys/kernel/osrelease").trim()),
            cpu: or_unknown(&cpu_model(&read("/proc/cpuinfo"))),
            thp: or_unknown(&bracketed(&read(
                "/sys/kernel/mm/transparent_hugepage/enabled",
            ))),
            date: today(),
        }
    }

    /// One line for the top of a table.
    pub fn line(&self) -> String {
        format!(
            "{} core(s), {}, Linux {}, transparent huge pages `{}`, {}",
            self.cores, self.cpu, self.kernel, self.thp, self.date
        )
    }
}

fn or_unknown(text: &str) -> String {
    if text.is_empty() {
        "unknown".to_owned()
    } else {
        text.to_owned()
    }
}

/// The first `model name` in the text of `/proc/cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default()
}

/// The word in brackets, e.g. `madvise` in `always [madvise] never`.
pub fn bracketed(text: &str) -> String {
    text.split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(word, _)| word.to_owned())
        .unwrap_or_default()
}

/// Today's date (UTC) from the system clock.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_model_and_thp_mode() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n";
        assert_eq!(cpu_model(cpuinfo), "AMD EPYC 7B13");
        assert_eq!(cpu_model("processor : 0\n"), "");
        assert_eq!(bracketed("always [madvise] never\n"), "madvise");
        assert_eq!(bracketed("garbage"), "");
    }

    #[test]
    fn dates_from_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_780), (2026, 11, 23));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
