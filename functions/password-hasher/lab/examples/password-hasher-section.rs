//! Lab probe: the password hasher's own section of the report, every bcrypt
//! candidate side by side and the scaling over threads
//! (`lab_probes::section` says the contract).

lab_probes::declare_allocator!();

fn main() -> Result<(), String> {
    lab_probes::section::run(password_hasher_lab::section::measure)
}
