//! Lab probe: the Arrow worker's own section of the report, the Step
//! Functions fan-out against one function and the daily report's rate
//! (`lab_probes::section` says the contract).

lab_probes::declare_allocator!();

fn main() -> Result<(), String> {
    lab_probes::section::run(arrow_worker_lab::section::measure)
}
