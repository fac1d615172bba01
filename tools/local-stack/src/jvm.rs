//! The `java` command line of the local stack's JVM servers (DynamoDB Local,
//! ElasticMQ, Zipkin): their heap bound, and how the JVM compiles their code,
//! by how long they serve.

use std::process::Command;

/// How the JVM compiles a server's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    /// For a server that lives for one test or one short run: the quick
    /// compiler (C1) only. Such a server ends before the optimising compiler
    /// (C2) pays back the CPU it spends; measured on 2 cores, one test file at
    /// a time, the servers' CPU and the file's time, `Peak` against `Quick`:
    /// `queue_to_table` 32.8 against 15.0 CPU-s (28.2 against 19.6 s),
    /// `fault_injection` 88.8 against 50.5 CPU-s (70.2 against 54.5 s).
    Quick,
    /// For a server that serves for minutes (`cargo xtask run`, the lab, a
    /// scan of 64,000 orders): the JVM's default, hot code compiled by C2
    /// (that scan's test file: 93 s, against 114 s with `Quick`).
    Peak,
}

/// `java -Xmx<max_heap>` with the flags of `compiler`; the caller adds the
/// server's class path and arguments.
pub fn command(max_heap: &str, compiler: Compiler) -> Command {
    let mut command = Command::new("java");
    command.arg(format!("-Xmx{max_heap}"));
    if compiler == Compiler::Quick {
        command.arg("-XX:TieredStopAtLevel=1");
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(command: &Command) -> Vec<String> {
        command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_quick_server_stops_at_the_first_compiler_and_a_peak_one_has_the_default() {
        assert_eq!(
            args(&command("1g", Compiler::Quick)),
            ["-Xmx1g", "-XX:TieredStopAtLevel=1"]
        );
        assert_eq!(args(&command("256m", Compiler::Peak)), ["-Xmx256m"]);
    }
}
